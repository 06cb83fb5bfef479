#pragma once
// What a snapshot holds and how it maps onto the model and optimizer. The pickled dict is exactly
// minGPT-ddp's Snapshot after dataclasses.asdict, three keys and no more:
//   model_state      name -> tensor, exactly the PyTorch module's state_dict (masks included)
//   optimizer_state  PyTorch's AdamW state_dict: {"state": {i: {step, exp_avg, exp_avg_sq}},
//                    "param_groups": [decay group, no-decay group]}, indices over the sorted names
//   finished_epoch   1-based number of the last completed epoch (minGPT-ddp's meaning)
// Our exact-resume record (steps into the next epoch, world size, seed, model dimensions) goes
// beside it in the archive (resume_record.hpp). Restoring follows minGPT-ddp's _load_snapshot:
// the model strictly, and the optimizer with the snapshot's own hyperparameters (learning rate,
// betas, eps, weight decay), as AdamW.load_state_dict does in Python.
#include <torch/torch.h>

#include <functional>
#include <string>

#include "fused_adamw.hpp"
#include "gpt_model.hpp"
#include "host_staging.hpp"
#include "resume_record.hpp"
#include "snapshot_io.hpp"

namespace ddprun::train {

// Builds the AdamW optimizer over `groups` (decay group first) with minGPT-ddp's settings.
std::unique_ptr<FusedAdamW> make_adamw(GptImpl& model, const ParameterGroups& groups,
                                       double learning_rate, double weight_decay);

struct SnapshotParts {
  c10::IValue content;        // the pickled dict, its tensors in `staging`'s host buffers
  std::string resume_record;  // encode_resume_record's JSON
  // Blocks until the host copies are complete; empty when they already are (host_staging.hpp).
  std::function<void()> wait_for_copies;
};

// No host synchronisation: the step counts come as tensors too (FusedAdamW::step_count). The
// tensors are copied into `staging`'s buffers, which the next call overwrites.
SnapshotParts make_snapshot(const GptImpl& model, FusedAdamW& optimizer,
                            const ParameterGroups& groups, const TrainingPosition& position,
                            HostStaging& staging);

struct RestoredSnapshot {
  // From the resume record when there is one; else finished_epoch, and the next epoch from its
  // start (world_size and seed then keep their defaults and mean nothing).
  TrainingPosition position;
  bool has_resume_record = false;  // false: minGPT-ddp (or another PyTorch program) wrote it
  // The decay group's settings, taken from the snapshot into the optimizer.
  double learning_rate = 0.0;
  double weight_decay = 0.0;
};

// Loads `snapshot` (read from `path`, named in messages) into model and optimizer; throws
// SnapshotError when its content does not fit this model, and then changes neither.
RestoredSnapshot restore_snapshot(const SnapshotFile& snapshot, const std::string& path,
                                  GptImpl& model, FusedAdamW& optimizer,
                                  const ParameterGroups& groups);

}  // namespace ddprun::train
