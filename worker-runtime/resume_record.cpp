#include "resume_record.hpp"

#include <nlohmann/json.hpp>

namespace ddprun::train {
namespace {

constexpr std::string_view kFormat = "ddprun-train/2";

int64_t field(const nlohmann::json& object, const char* key, int64_t minimum) {
  const auto it = object.find(key);
  if (it == object.end()) {
    throw ResumeRecordError(std::string("has no '") + key + "'");
  }
  if (!it->is_number_integer()) {
    throw ResumeRecordError(std::string("'") + key + "' is not an integer");
  }
  const auto value = it->get<int64_t>();
  if (value < minimum) {
    throw ResumeRecordError(std::string("'") + key + "' is " + std::to_string(value) + ", below " +
                            std::to_string(minimum));
  }
  return value;
}

}  // namespace

std::string encode_resume_record(const ResumeRecord& record) {
  const auto& p = record.position;
  const auto& m = record.model;
  return nlohmann::json{{"format", kFormat},
                        {"finished_epoch", p.finished_epoch},
                        {"steps_into_epoch", p.steps_into_epoch},
                        {"world_size", p.world_size},
                        {"seed", p.seed},
                        {"samples_into_epoch", p.samples_into_epoch},
                        {"model",
                         {{"vocab_size", m.vocab_size},
                          {"block_size", m.block_size},
                          {"n_layer", m.n_layer},
                          {"n_head", m.n_head},
                          {"n_embd", m.n_embd}}}}
      .dump();
}

ResumeRecord decode_resume_record(std::string_view json) {
  if (json.size() > kMaxResumeRecordBytes) {
    throw ResumeRecordError("is " + std::to_string(json.size()) + " bytes, more than " +
                            std::to_string(kMaxResumeRecordBytes));
  }
  const auto root = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    throw ResumeRecordError("is not a JSON object");
  }
  const auto format = root.find("format");
  if (format == root.end() || !format->is_string() || format->get<std::string>() != kFormat) {
    throw ResumeRecordError("is not of format " + std::string(kFormat));
  }
  const auto model = root.find("model");
  if (model == root.end() || !model->is_object()) {
    throw ResumeRecordError("has no 'model' object");
  }
  ResumeRecord record;
  record.position.finished_epoch = field(root, "finished_epoch", 0);
  record.position.steps_into_epoch = field(root, "steps_into_epoch", 0);
  record.position.world_size = field(root, "world_size", 1);
  record.position.seed = field(root, "seed", 0);
  if (root.contains("samples_into_epoch")) {
    record.position.samples_into_epoch = field(root, "samples_into_epoch", -1);
  }
  record.model.vocab_size = field(*model, "vocab_size", 1);
  record.model.block_size = field(*model, "block_size", 1);
  record.model.n_layer = field(*model, "n_layer", 1);
  record.model.n_head = field(*model, "n_head", 1);
  record.model.n_embd = field(*model, "n_embd", 1);
  return record;
}

}  // namespace ddprun::train
