#pragma once
// What a snapshot holds and how it maps onto the model and optimizer:
//   model_state      name -> tensor, exactly the PyTorch module's state_dict (masks included)
//   optimizer_state  PyTorch's AdamW state_dict: {"state": {i: {step, exp_avg, exp_avg_sq}},
//                    "param_groups": [decay group, no-decay group]}, indices over the sorted names
//   finished_epoch   1-based number of the last completed epoch (minGPT-ddp's meaning)
//   resume_state     ours: steps done in the next epoch (SIGTERM snapshots), world size, seed and
//                    the model shape, so a mismatched snapshot is refused by name.
#include <torch/torch.h>

#include <string>

#include "gpt_model.hpp"

namespace ddprun::train {

struct TrainingPosition {
  int64_t finished_epoch = 0;
  int64_t steps_into_epoch = 0;  // steps of epoch finished_epoch + 1 already taken
  int64_t world_size = 1;
  int64_t seed = 0;
};

// Builds the AdamW optimizer over `groups` (decay group first) with minGPT-ddp's settings.
std::unique_ptr<torch::optim::AdamW> make_adamw(GptImpl& model, const ParameterGroups& groups,
                                                double learning_rate, double weight_decay);

c10::IValue make_snapshot(const GptImpl& model, const torch::optim::AdamW& optimizer,
                          const ParameterGroups& groups, const TrainingPosition& position);

// Loads `snapshot` (read from `path`, named in messages) into model and optimizer; throws
// SnapshotError when its content does not fit this model.
TrainingPosition restore_snapshot(const c10::IValue& snapshot, const std::string& path,
                                  GptImpl& model, torch::optim::AdamW& optimizer,
                                  const ParameterGroups& groups);

}  // namespace ddprun::train
