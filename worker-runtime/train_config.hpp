#pragma once
// The trainer's configuration: minGPT-ddp's gpt2_train_cfg.yaml layout (data_config, gpt_config,
// trainer_config, optimizer_config, same keys) plus a few keys of our own, read from YAML or JSON
// and Hydra-style `section.key=value` overrides. Pure: parsing and validation, no file system.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "config_error.hpp"
#include "precision.hpp"

namespace ddprun::train {

// Marks "use the corpus compiled into the executable" in data_config.path.
inline constexpr std::string_view kEmbeddedCorpusPath = "embedded:default_corpus.txt";

struct DataConfig {
  std::string path{kEmbeddedCorpusPath};
  int64_t block_size = 64;
  double train_split = 0.9;
  double truncate = 1.0;
};

struct GptConfig {
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_embd = 64;
  double embd_pdrop = 0.1;
  double resid_pdrop = 0.1;
  double attn_pdrop = 0.1;
};

struct TrainerConfig {
  int64_t max_epochs = 4;
  int64_t batch_size = 32;          // per rank, as in minGPT-ddp
  int64_t data_loader_workers = 0;  // accepted for compatibility; batches are built in-process
  double grad_norm_clip = 1.0;
  std::string snapshot_path = "snapshot.pt";
  int64_t save_every = 1;  // epochs, as in minGPT-ddp
  // minGPT-ddp's switch for mixed precision; precision=auto turns it into bf16 or fp16
  // (precision.hpp decides per device), any other precision overrides it.
  bool use_amp = false;
  // Our additions.
  int64_t seed = 1337;
  int64_t steps_per_epoch = 0;  // 0: a full pass over the training split
  int64_t eval_batches = 0;     // 0: the whole test split
  int64_t log_every = 10;
  std::string metrics_path;  // empty: no JSON lines
  Precision precision = Precision::kAuto;
  int64_t sample_tokens = 200;  // rank 0 prints a sample this long after the last epoch; 0: none
  int64_t sample_every = 0;     // and every this many epochs; 0: only after the last
  // Snapshots inside an epoch, written in the background (snapshot_writer.hpp): every this many
  // steps, and/or every this many seconds; 0: off. save_every's epoch snapshots stay.
  int64_t save_every_steps = 0;
  double save_every_seconds = 0.0;
  int64_t keep_snapshots = 2;  // the newest and keep_snapshots - 1 older (snapshot_generations)
  // stop_after="E:S": once step S of epoch E is done (S 0: once epoch E-1 is), write the snapshot
  // and exit 0, to go on later (in another world, say). 0:0: off.
  int64_t stop_after_epoch = 0;
  int64_t stop_after_step = 0;
};

struct OptimizerConfig {
  double weight_decay = 0.1;
  double learning_rate = 3e-4;
};

struct TrainConfig {
  DataConfig data;
  GptConfig gpt;
  TrainerConfig trainer;
  OptimizerConfig optimizer;
};

// Built-in presets: "default" (small, trains visibly on 2 CPU cores) and "mingpt" (the values of
// minGPT-ddp's gpt2_train_cfg.yaml, reading tinyshakespeare from input.txt, full passes).
std::vector<std::string> preset_names();
TrainConfig preset(std::string_view name);  // throws ConfigError for an unknown name

// The rule for what `ddprun train [CONFIG] [overrides]` means (README, `ddprun --help`): a
// configuration file means that file's settings, and keys it omits take minGPT-ddp's defaults,
// the values of its gpt2_train_cfg.yaml (the "mingpt" preset); without a file the "default"
// preset applies. Overrides apply last, on either.
inline constexpr std::string_view kPresetWithoutFile = "default";
inline constexpr std::string_view kDefaultsUnderFile = "mingpt";
TrainConfig config_from_file(std::string_view text, std::string_view source);

// Applies a YAML (or JSON) document on top of `base`. `source` names the document in messages.
TrainConfig apply_document(TrainConfig base, std::string_view text, std::string_view source);

// Applies one `section.key=value` override (value parsed as a YAML scalar).
TrainConfig apply_override(TrainConfig base, std::string_view assignment);

// Checks the relations between values that do not depend on the data (ranges, divisibility).
void validate(const TrainConfig& config);

}  // namespace ddprun::train
