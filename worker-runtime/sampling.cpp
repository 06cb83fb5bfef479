#include "sampling.hpp"

#include <filesystem>

#include "char_corpus.hpp"
#include "mixed_precision.hpp"
#include "snapshot_io.hpp"
#include "snapshot_state.hpp"

namespace ddprun::train {

void run_sampling(const TrainConfig& config, const std::string& corpus_text,
                  const std::string& corpus_name, const SampleRequest& request, std::ostream& out) {
  const auto corpus =
      make_char_corpus(corpus_text, config.data.truncate, config.data.block_size, corpus_name);
  const auto& path =
      request.snapshot_path.empty() ? config.trainer.snapshot_path : request.snapshot_path;
  if (!std::filesystem::exists(path)) {
    throw ConfigError("no snapshot at " + path + " (--snapshot PATH, or train first)");
  }
  const auto prompt = request.prompt.empty() ? std::vector<int64_t>{corpus.tokens.front()}
                                             : encode_text(corpus, request.prompt, "the prompt");
  const torch::Device device =
      torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  const auto plan =
      plan_precision(config.trainer.precision, config.trainer.use_amp, detect_device_caps(device));
  apply_matmul_precision(plan, device);
  Gpt model(GptShape{{static_cast<int64_t>(corpus.vocabulary.size()), config.data.block_size,
                      config.gpt.n_layer, config.gpt.n_head, config.gpt.n_embd},
                     0.0,
                     0.0,
                     0.0});
  model->to(device);
  const auto groups = optimizer_parameter_groups(*model);
  // The optimizer only receives the snapshot's optimizer state, which restore_snapshot checks
  // with the rest: a snapshot that would not resume does not sample either.
  auto optimizer =
      make_adamw(*model, groups, config.optimizer.learning_rate, config.optimizer.weight_decay);
  restore_snapshot(read_snapshot_file(path), path, *model, *optimizer, groups);
  const auto text = generate(*model, prompt, request.generation, autocast_dtype(plan));
  out << decode_tokens(corpus, prompt) << decode_tokens(corpus, text) << '\n' << std::flush;
}

}  // namespace ddprun::train
