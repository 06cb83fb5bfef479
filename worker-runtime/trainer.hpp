#pragma once
// The training driver: builds the data, model, optimizer and DDP machinery for one rank, resumes
// from the snapshot if there is one, runs the epochs and writes snapshots (global rank 0).
#include <functional>
#include <ostream>
#include <string>

#include "run_environment.hpp"
#include "train_config.hpp"

namespace ddprun::train {

struct TrainerInputs {
  TrainConfig config;
  std::string corpus_text;  // UTF-8
  std::string corpus_name;  // for messages
  RunEnvironment env;
  // Polled at each vote of the ranks (every log line, and about twice a second); true once
  // preemption (SIGTERM) was requested on this rank.
  std::function<bool()> stop_requested;
};

enum class TrainOutcome { kCompleted, kStopped };

// Throws ConfigError for data that does not fit the configuration, SnapshotError for an unusable
// snapshot, and std::runtime_error/c10::Error for failures of the store or the collectives.
TrainOutcome run_training(const TrainerInputs& inputs, std::ostream& out);

}  // namespace ddprun::train
