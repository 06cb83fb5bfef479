#include "snapshot_state.hpp"

#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_set>

namespace ddprun::train {
namespace {

using Dict = c10::impl::GenericDict;

Dict make_dict() {
  return Dict(c10::StringType::get(), c10::AnyType::get());
}

std::string shape_text(c10::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

std::map<std::string, torch::Tensor> parameters_by_name(const GptImpl& model) {
  std::map<std::string, torch::Tensor> named;
  for (const auto& item : model.named_parameters()) {
    named.emplace(item.key(), item.value());
  }
  return named;
}

// LibTorch's optimizers key their per-parameter state by the parameter's TensorImpl (since 2.2).
void* state_key(const torch::Tensor& parameter) {
  return parameter.unsafeGetTensorImpl();
}

// "n_layer=2, n_head=4, ..." for the dimensions a snapshot reveals (n_head = 0: unknown).
std::string dims_text(const ModelDims& d) {
  std::string text = "n_layer=" + std::to_string(d.n_layer);
  if (d.n_head > 0) {
    text += ", n_head=" + std::to_string(d.n_head);
  }
  return text + ", n_embd=" + std::to_string(d.n_embd) +
         ", vocab_size=" + std::to_string(d.vocab_size) +
         ", block_size=" + std::to_string(d.block_size);
}

// Reading helpers that turn a wrong type into a message naming the file and the field.
class SnapshotReader {
 public:
  explicit SnapshotReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw SnapshotError("snapshot " + path_ + ": " + what);
  }

  const c10::IValue& field(const Dict& dict, const std::string& key,
                           const std::string& where) const {
    const auto it = dict.find(c10::IValue(key));
    if (it == dict.end()) {
      fail("missing " + where + key);
    }
    return it->value();
  }

  const c10::IValue* optional_field(const Dict& dict, const std::string& key) const {
    const auto it = dict.find(c10::IValue(key));
    return it == dict.end() ? nullptr : &it->value();
  }

  Dict dict(const c10::IValue& value, const std::string& what) const {
    if (!value.isGenericDict()) {
      fail(what + " is not a dict");
    }
    return value.toGenericDict();
  }

  int64_t integer(const c10::IValue& value, const std::string& what) const {
    if (value.isInt()) {
      return value.toInt();
    }
    if (value.isTensor() && value.toTensor().numel() == 1) {
      const double v = value.toTensor().item<double>();
      if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 9.0e15) {
        return static_cast<int64_t>(v);
      }
    }
    fail(what + " is not an integer");
  }

  double number(const c10::IValue& value, const std::string& what) const {
    if (value.isDouble() || value.isInt()) {
      const double v = value.isDouble() ? value.toDouble() : static_cast<double>(value.toInt());
      if (std::isfinite(v) && v >= 0.0) {
        return v;
      }
    }
    fail(what + " is not a finite non-negative number");
  }

  bool flag(const c10::IValue* value, const std::string& what) const {
    if (value == nullptr || value->isNone()) {
      return false;
    }
    if (!value->isBool()) {
      fail(what + " is not a boolean");
    }
    return value->toBool();
  }

  torch::Tensor tensor(const c10::IValue& value, const std::string& what,
                       c10::IntArrayRef expected) const {
    if (!value.isTensor()) {
      fail(what + " is not a tensor");
    }
    auto t = value.toTensor();
    if (t.sizes() != expected) {
      fail(what + " has shape " + shape_text(t.sizes()) + " but this model needs " +
           shape_text(expected) + " (snapshot of a different configuration?)");
    }
    if (t.scalar_type() != torch::kFloat) {
      fail(what + " is " + std::string(c10::toString(t.scalar_type())) + ", not float32");
    }
    return t;
  }

 private:
  std::string path_;
};

// The dimensions a PyTorch state_dict reveals (all but n_head); nullopt when its key tensors are
// missing or odd, which the strict per-entry check then reports by name.
std::optional<ModelDims> dims_from_state(const Dict& model_state) {
  const auto find = [&](const char* key) -> std::optional<torch::Tensor> {
    const auto it = model_state.find(c10::IValue(std::string(key)));
    if (it == model_state.end() || !it->value().isTensor()) {
      return std::nullopt;
    }
    return it->value().toTensor();
  };
  const auto tok = find("emb_stem.tok_emb.weight");
  const auto pos = find("emb_stem.pos_emb");
  if (!tok || !pos || tok->dim() != 2 || pos->dim() != 3) {
    return std::nullopt;
  }
  ModelDims dims{tok->size(0), pos->size(1), 0, 0, tok->size(1)};
  const std::string prefix = "blocks.";
  for (const auto& entry : model_state) {
    if (!entry.key().isString()) {
      continue;
    }
    const auto& name = entry.key().toStringRef();
    if (name.rfind(prefix, 0) != 0) {
      continue;
    }
    const auto end = name.find('.', prefix.size());
    const auto digits = name.substr(prefix.size(), end - prefix.size());
    if (!digits.empty() && digits.size() < 7 &&
        digits.find_first_not_of("0123456789") == std::string::npos) {
      dims.n_layer = std::max<int64_t>(dims.n_layer, std::stoll(digits) + 1);
    }
  }
  return dims;
}

// The exact-resume record: the archive's own, else the "resume_state" entry ddprun-train put in
// the dict itself before the record existed (format ddprun-train/1), else none.
std::optional<ResumeRecord> resume_record_of(const SnapshotFile& file, const Dict& top,
                                             const SnapshotReader& read) {
  if (file.resume_record) {
    try {
      return decode_resume_record(*file.resume_record);
    } catch (const ResumeRecordError& e) {
      read.fail(std::string("the resume record ") + std::string(kResumeRecordName) + " " +
                e.what());
    }
  }
  const auto* legacy = read.optional_field(top, "resume_state");
  if (legacy == nullptr) {
    return std::nullopt;
  }
  const auto resume = read.dict(*legacy, "resume_state");
  auto get = [&](const char* key) {
    const auto value = read.integer(read.field(resume, key, "resume_state."), key);
    if (value < 0) {
      read.fail(std::string("resume_state.") + key + " is negative");
    }
    return value;
  };
  ResumeRecord record;
  record.position = {read.integer(read.field(top, "finished_epoch", ""), "finished_epoch"),
                     get("steps_into_epoch"), get("world_size"), get("seed")};
  record.model = {get("vocab_size"), get("block_size"), get("n_layer"), get("n_head"),
                  get("n_embd")};
  return record;
}

struct GroupSettings {
  double lr = 0.0;
  std::pair<double, double> betas;
  double eps = 0.0;
  double weight_decay = 0.0;
  bool amsgrad = false;
};

GroupSettings read_group_settings(const Dict& group, const std::string& where,
                                  const SnapshotReader& read) {
  GroupSettings s;
  s.lr = read.number(read.field(group, "lr", where), where + "lr");
  s.eps = read.number(read.field(group, "eps", where), where + "eps");
  s.weight_decay = read.number(read.field(group, "weight_decay", where), where + "weight_decay");
  const auto& betas = read.field(group, "betas", where);
  const auto pair = betas.isTuple()  ? betas.toTupleRef().elements().vec()
                    : betas.isList() ? betas.toListRef().vec()
                                     : std::vector<c10::IValue>{};
  if (pair.size() != 2) {
    read.fail(where + "betas is not a pair of numbers");
  }
  s.betas = {read.number(pair[0], where + "betas[0]"), read.number(pair[1], where + "betas[1]")};
  if (s.betas.first >= 1.0 || s.betas.second >= 1.0) {
    read.fail(where + "betas must be below 1");
  }
  s.amsgrad = read.flag(read.optional_field(group, "amsgrad"), where + "amsgrad");
  if (read.flag(read.optional_field(group, "maximize"), where + "maximize")) {
    read.fail(where + "maximize is True; LibTorch's AdamW only minimises");
  }
  return s;
}

// The loaded tensor itself when nothing else can see its memory (the usual case: a whole
// storage of its own, used once), else a copy. Skipping the copy saves two thirds of a
// resume's memory traffic; copying shared memory keeps optimizer states from aliasing.
torch::Tensor owned_copy(const torch::Tensor& loaded, std::unordered_set<const void*>& taken) {
  const bool exclusive = loaded.is_contiguous() && loaded.storage_offset() == 0 &&
                         loaded.storage().nbytes() == loaded.nbytes() &&
                         loaded.storage().use_count() == 1 &&
                         taken.insert(loaded.storage().data()).second;
  return exclusive ? loaded : loaded.clone();
}

}  // namespace

std::unique_ptr<FusedAdamW> make_adamw(GptImpl& model, const ParameterGroups& groups,
                                       double learning_rate, double weight_decay) {
  const auto named = parameters_by_name(model);
  auto group_of = [&](const std::vector<std::string>& names, double decay) {
    std::vector<torch::Tensor> params;
    for (const auto& name : names) {
      params.push_back(named.at(name));
    }
    auto options = std::make_unique<torch::optim::AdamWOptions>(learning_rate);
    options->betas({0.9, 0.95}).weight_decay(decay).eps(1e-8).amsgrad(false);
    return torch::optim::OptimizerParamGroup(params, std::move(options));
  };
  std::vector<torch::optim::OptimizerParamGroup> param_groups{group_of(groups.decay, weight_decay),
                                                              group_of(groups.no_decay, 0.0)};
  return std::make_unique<FusedAdamW>(param_groups, torch::optim::AdamWOptions(learning_rate));
}

SnapshotParts make_snapshot(const GptImpl& model, FusedAdamW& optimizer,
                            const ParameterGroups& groups, const TrainingPosition& position,
                            HostStaging& staging) {
  staging.begin();
  // Always copies, on the CPU too: the snapshot is written beside the training, which goes on
  // changing the live tensors (snapshot_writer.hpp).
  const auto to_host = [&](const torch::Tensor& t) { return staging.copy(t); };
  auto model_state = make_dict();
  for (const auto& item : model.named_parameters()) {
    model_state.insert(item.key(), to_host(item.value()));
  }
  for (const auto& item : model.named_buffers()) {
    model_state.insert(item.key(), to_host(item.value()));
  }

  const auto named = parameters_by_name(model);
  auto state = Dict(c10::IntType::get(), c10::AnyType::get());
  auto param_groups = c10::impl::GenericList(c10::AnyType::get());
  int64_t index = 0;
  const std::vector<const std::vector<std::string>*> ordered{&groups.decay, &groups.no_decay};
  for (size_t g = 0; g < ordered.size(); ++g) {
    const auto& options =
        static_cast<const torch::optim::AdamWOptions&>(optimizer.param_groups()[g].options());
    auto indices = c10::impl::GenericList(c10::AnyType::get());  // not an IntList: no build_intlist
    for (const auto& name : *ordered[g]) {
      const auto it = optimizer.state().find(state_key(named.at(name)));
      if (it != optimizer.state().end()) {
        const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
        auto entry = make_dict();
        // PyTorch >= 1.12 keeps `step` as a float32 0-d tensor.
        entry.insert("step", to_host(optimizer.step_count(named.at(name))));
        entry.insert("exp_avg", to_host(s.exp_avg()));
        entry.insert("exp_avg_sq", to_host(s.exp_avg_sq()));
        if (options.amsgrad()) {
          entry.insert("max_exp_avg_sq", to_host(s.max_exp_avg_sq()));
        }
        state.insert(index, entry);
      }
      indices.push_back(index);
      ++index;
    }
    // The keys of PyTorch 2.x's AdamW param_groups; PyTorch 1.13 keeps the ones it does not know.
    auto group = make_dict();
    group.insert("lr", options.lr());
    group.insert("betas", c10::ivalue::Tuple::create(
                              {std::get<0>(options.betas()), std::get<1>(options.betas())}));
    group.insert("eps", options.eps());
    group.insert("weight_decay", options.weight_decay());
    group.insert("amsgrad", options.amsgrad());
    group.insert("maximize", false);
    group.insert("foreach", c10::IValue());
    group.insert("capturable", false);
    group.insert("differentiable", false);
    group.insert("fused", c10::IValue());
    group.insert("decoupled_weight_decay", true);
    group.insert("params", indices);
    param_groups.push_back(group);
  }
  auto optimizer_state = make_dict();
  optimizer_state.insert("state", state);
  optimizer_state.insert("param_groups", param_groups);

  auto snapshot = make_dict();
  snapshot.insert("model_state", model_state);
  snapshot.insert("optimizer_state", optimizer_state);
  snapshot.insert("finished_epoch", position.finished_epoch);
  return {snapshot, encode_resume_record({position, static_cast<const ModelDims&>(model.shape())}),
          staging.end()};
}

namespace {

// The position to resume from, after the model's dimensions are checked against this run's, so
// that a snapshot of another configuration is named as such.
RestoredSnapshot read_position(const SnapshotFile& snapshot, const SnapshotReader& read,
                               const Dict& top, const Dict& model_state, const GptImpl& model) {
  RestoredSnapshot restored;
  restored.position.finished_epoch =
      read.integer(read.field(top, "finished_epoch", ""), "finished_epoch");
  if (restored.position.finished_epoch < 0) {
    read.fail("finished_epoch is negative");
  }
  const auto ours = static_cast<const ModelDims&>(model.shape());
  const auto require_dims = [&](const ModelDims& theirs, const ModelDims& expected) {
    if (theirs != expected) {
      read.fail("it holds a model with " + dims_text(theirs) + " but this run builds " +
                dims_text(expected) +
                " (gpt_config and data_config's path, truncate and block_size must match the run "
                "that wrote it)");
    }
  };
  const auto record = resume_record_of(snapshot, top, read);
  if (record) {
    if (record->position.finished_epoch != restored.position.finished_epoch) {
      read.fail("its resume record is for finished epoch " +
                std::to_string(record->position.finished_epoch) + " but finished_epoch is " +
                std::to_string(restored.position.finished_epoch) + " (the dict was edited?)");
    }
    require_dims(record->model, ours);
    restored.position = record->position;
    restored.has_resume_record = true;
  } else if (const auto theirs = dims_from_state(model_state)) {
    auto compared = ours;
    compared.n_head = 0;  // a state_dict does not reveal it
    require_dims(*theirs, compared);
  }
  return restored;
}

using TensorCopies = std::vector<std::pair<torch::Tensor, torch::Tensor>>;

// The model's tensors, strict like load_state_dict(strict=True): target and source pairs.
TensorCopies read_model_state(const SnapshotReader& read, const Dict& model_state, GptImpl& model) {
  TensorCopies copies;
  size_t expected_entries = 0;
  auto collect = [&](const std::string& name, const torch::Tensor& target) {
    ++expected_entries;
    const auto it = model_state.find(c10::IValue(name));
    if (it == model_state.end()) {
      read.fail("model_state has no entry '" + name + "'");
    }
    copies.emplace_back(target,
                        read.tensor(it->value(), "model_state['" + name + "']", target.sizes()));
  };
  for (const auto& item : model.named_parameters()) {
    collect(item.key(), item.value());
  }
  for (const auto& item : model.named_buffers()) {
    collect(item.key(), item.value());
  }
  if (model_state.size() != expected_entries) {
    read.fail("model_state has " + std::to_string(model_state.size()) + " entries, this model " +
              std::to_string(expected_entries) + " (unexpected keys; strict loading refuses them)");
  }
  return copies;
}

// The optimizer's two groups as PyTorch lays them out: each group's `params` lists the state
// indices of that group's parameters in order (decay names, then no-decay names), as in
// AdamW.load_state_dict.
struct OptimizerGroups {
  std::map<int64_t, std::pair<std::string, size_t>> name_of_index;  // -> name, group
  std::vector<GroupSettings> settings;
};

OptimizerGroups read_param_groups(const SnapshotReader& read, const Dict& optimizer_state,
                                  const ParameterGroups& groups) {
  const auto& groups_value = read.field(optimizer_state, "param_groups", "optimizer_state.");
  if (!groups_value.isList() || groups_value.toListRef().size() != 2) {
    read.fail("optimizer_state.param_groups is not a list of two groups (decay, no decay)");
  }
  const std::vector<const std::vector<std::string>*> ordered{&groups.decay, &groups.no_decay};
  OptimizerGroups out;
  for (size_t g = 0; g < 2; ++g) {
    const auto where = "optimizer_state.param_groups[" + std::to_string(g) + "].";
    const auto group = read.dict(groups_value.toListRef()[g], where.substr(0, where.size() - 1));
    const auto& params = read.field(group, "params", where);
    const auto& names = *ordered[g];
    if (!params.isList() || params.toListRef().size() != names.size()) {
      read.fail(where + "params does not list " + std::to_string(names.size()) +
                " parameters (an optimizer over a different model?)");
    }
    for (size_t k = 0; k < names.size(); ++k) {
      const auto index = read.integer(params.toListRef()[k], where + "params[i]");
      if (!out.name_of_index.emplace(index, std::pair{names[k], g}).second) {
        read.fail("optimizer state index " + std::to_string(index) + " is listed twice");
      }
    }
    out.settings.push_back(read_group_settings(group, where, read));
  }
  return out;
}

using ParamStates = std::vector<std::pair<void*, std::unique_ptr<torch::optim::AdamWParamState>>>;

// Each parameter's AdamW state, keyed as LibTorch's optimizer keys it.
ParamStates read_param_states(const SnapshotReader& read, const Dict& state,
                              const OptimizerGroups& groups, GptImpl& model) {
  const auto named = parameters_by_name(model);
  ParamStates states;
  std::unordered_set<const void*> taken;
  for (const auto& entry : state) {
    const auto index = read.integer(entry.key(), "an optimizer state index");
    const auto name_it = groups.name_of_index.find(index);
    if (name_it == groups.name_of_index.end()) {
      read.fail("optimizer state index " + std::to_string(index) + " is in no param_group");
    }
    const auto& [name, group_index] = name_it->second;
    const auto& param = named.at(name);
    const auto where = "optimizer_state.state[" + std::to_string(index) + "]";
    const auto slot = read.dict(entry.value(), where);
    auto load = [&](const char* key) {
      return owned_copy(
          read.tensor(read.field(slot, key, where + "."), where + "." + key, param.sizes())
              .to(param.device()),
          taken);
    };
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    const auto step = read.integer(read.field(slot, "step", where + "."), where + ".step");
    if (step < 0) {
      read.fail(where + ".step is negative");
    }
    s->step(step);
    s->exp_avg(load("exp_avg"));
    s->exp_avg_sq(load("exp_avg_sq"));
    if (groups.settings[group_index].amsgrad) {
      s->max_exp_avg_sq(load("max_exp_avg_sq"));
    }
    states.emplace_back(state_key(param), std::move(s));
  }
  return states;
}

}  // namespace

RestoredSnapshot restore_snapshot(const SnapshotFile& snapshot, const std::string& path,
                                  GptImpl& model, FusedAdamW& optimizer,
                                  const ParameterGroups& groups) {
  const SnapshotReader read(path);
  const auto top = read.dict(snapshot.content, "the top level");
  const auto model_state = read.dict(read.field(top, "model_state", ""), "model_state");
  RestoredSnapshot restored = read_position(snapshot, read, top, model_state, model);
  const TensorCopies copies = read_model_state(read, model_state, model);
  const auto optimizer_state = read.dict(read.field(top, "optimizer_state", ""), "optimizer_state");
  const auto state =
      read.dict(read.field(optimizer_state, "state", "optimizer_state."), "optimizer_state.state");
  const OptimizerGroups optimizer_groups = read_param_groups(read, optimizer_state, groups);
  ParamStates states = read_param_states(read, state, optimizer_groups, model);

  // Everything checked: now change the model and optimizer.
  torch::NoGradGuard no_grad;
  for (const auto& [target, source] : copies) {
    target.copy_(source);
  }
  optimizer.state().clear();
  optimizer.forget_step_counts();
  for (auto& [key, s] : states) {
    optimizer.state()[key] = std::move(s);
  }
  for (size_t g = 0; g < 2; ++g) {
    auto& options = static_cast<torch::optim::AdamWOptions&>(optimizer.param_groups()[g].options());
    const auto& s = optimizer_groups.settings[g];
    options.lr(s.lr).betas({s.betas.first, s.betas.second}).eps(s.eps);
    options.weight_decay(s.weight_decay).amsgrad(s.amsgrad);
  }
  restored.learning_rate = optimizer_groups.settings[0].lr;
  restored.weight_decay = optimizer_groups.settings[0].weight_decay;
  return restored;
}

}  // namespace ddprun::train
