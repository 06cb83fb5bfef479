#pragma once
// AdamW through LibTorch's fused kernel (at::_fused_adamw_, CUDA and CPU): one call per
// parameter group instead of a dozen small ops per parameter, the same arithmetic as
// torch.optim.AdamW(fused=True). It keeps its moments in torch::optim::AdamW's per-parameter
// state, so snapshots (snapshot_state.hpp) read and restore it exactly as before.
// The kernel reads each parameter's step count from a 0-d float tensor on the device; those
// tensors are the counts' truth while training (a step skipped for found_inf is taken back on the
// device, without a host synchronisation), and sync_step_counts() writes them into the state
// before a snapshot reads it.
#include <torch/torch.h>

#include <optional>
#include <vector>

namespace ddprun::train {

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  torch::Tensor step(LossClosure closure = nullptr) override;
  // found_inf (0-d float32 on the device, from LossScaler::unscale): where it is 1 the kernel
  // leaves parameters and moments alone and the step counts are taken back.
  void step_unless(const std::optional<torch::Tensor>& found_inf);
  // Writes the device step counts into the AdamW state (a host synchronisation): call before
  // reading the state. Call forget_step_counts() after replacing the state (a restore).
  void sync_step_counts();
  void forget_step_counts();
  // `parameter`'s step count as PyTorch's AdamW keeps it, a 0-d float32 tensor, without a host
  // synchronisation: the device count while steps may have been skipped, else the host one.
  torch::Tensor step_count(const torch::Tensor& parameter) const;
  // `parameter`'s AdamW state, made (zero moments, step 0) when it has none yet.
  torch::optim::AdamWParamState& param_state(const torch::Tensor& parameter);

 private:
  // Per parameter group, in the group's order; built from the state on first use.
  std::vector<std::vector<torch::Tensor>> step_counts_;
  bool steps_skippable_ = false;  // a found_inf was given: host counts may be ahead
};

}  // namespace ddprun::train
