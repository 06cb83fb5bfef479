#pragma once
// What live recovery moves from a surviving rank to every member of a new world (over the new
// process group, Collectives::broadcast_from): everything that must be equal on every rank for
// the next step to be the same step everywhere. Model parameters and buffers, AdamW's moments,
// step counts and hyperparameters, the loss scaler, and where training stands (epoch, steps
// and samples into it, steps committed). Dropout needs no generator state: it is re-derived from
// (seed, epoch, step, rank) before every step (trainer.cpp).
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "fused_adamw.hpp"
#include "gpt_model.hpp"
#include "loss_scaler.hpp"

namespace ddprun::train {

// Where the ranks stand after the last step every one of them applied.
struct LivePosition {
  int64_t finished_epoch = 0;
  int64_t steps_into_epoch = 0;    // steps of epoch finished_epoch + 1 taken
  int64_t samples_into_epoch = 0;  // its order's cursor (distributed_sampler.hpp)
  int64_t steps_committed = 0;     // steps taken since the run began, across every world
};

struct LiveState {
  std::vector<torch::Tensor> tensors;  // the model's and optimizer's own, overwritten in place
  torch::Tensor step_counts;           // float64, one per parameter in group order
  torch::Tensor hyperparameters;       // float64: lr and weight decay of each group
  torch::Tensor position;              // int64: LivePosition's four fields
};

// The state to send or receive. The optimizer is given state for parameters that have none yet
// (zero moments, step 0), so that every rank holds the same tensors; step counts are synced.
LiveState gather_live_state(GptImpl& model, FusedAdamW& optimizer, const LivePosition& position,
                            LossScaler* scaler);

// After the transfer: writes step counts and hyperparameters into the optimizer and returns
// the position.
LivePosition apply_live_state(const LiveState& state, FusedAdamW& optimizer);

// CRC-32 of every parameter's bytes, in order: equal on ranks that hold the same model.
uint32_t parameter_checksum(const GptImpl& model);

}  // namespace ddprun::train
