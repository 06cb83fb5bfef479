#pragma once
// `ddprun-train sample`: loads a snapshot (its own or minGPT-ddp's) into the model the
// configuration describes and prints the prompt followed by the text the model writes. The
// vocabulary comes from data_config.path and truncate, as in training: a snapshot holds weights,
// not the characters they stand for.
#include <ostream>
#include <string>

#include "generation.hpp"
#include "train_config.hpp"

namespace ddprun::train {

struct SampleRequest {
  std::string snapshot_path;  // empty: trainer_config.snapshot_path
  std::string prompt;         // UTF-8; empty: the corpus's first character
  GenerationOptions generation;
};

// Throws ConfigError (a prompt outside the vocabulary, no snapshot) or SnapshotError.
void run_sampling(const TrainConfig& config, const std::string& corpus_text,
                  const std::string& corpus_name, const SampleRequest& request, std::ostream& out);

}  // namespace ddprun::train
