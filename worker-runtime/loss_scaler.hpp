#pragma once
// fp16's dynamic loss scaling with torch.amp.GradScaler's rules and defaults: the loss is
// multiplied by the scale before backward; gradients are unscaled in place and checked for inf
// or NaN (found_inf, on the device: no host synchronisation); a step with found_inf is skipped
// by the optimizer; then the scale backs off (x0.5) on found_inf, or grows (x2) after
// growth_interval clean steps in a row.
// Under DDP the gradients are averaged before the check, so every rank sees the same found_inf
// and skips the same steps without a collective of its own (as GradScaler does).
#include <torch/torch.h>

#include <vector>

namespace ddprun::train {

struct LossScalerSettings {
  double init_scale = 65536.0;  // 2**16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  LossScaler(const torch::Device& device, const LossScalerSettings& settings);

  torch::Tensor scale(const torch::Tensor& loss) const;
  // Divides every gradient by the scale in place; returns found_inf (0-d float32 on the device:
  // 1 when any gradient holds an inf or NaN, else 0).
  torch::Tensor unscale(const std::vector<torch::Tensor>& gradients) const;
  // After the optimizer step: back off or grow the scale.
  void update(const torch::Tensor& found_inf);

  // The scale and growth tracker themselves, for live recovery's transfer (written in place).
  std::vector<torch::Tensor> state_tensors() const { return {scale_, growth_tracker_}; }

  // For reports and tests; reading them synchronises with the device.
  double current_scale() const;
  int64_t growth_tracker() const;

 private:
  LossScalerSettings settings_;
  torch::Tensor scale_;           // 0-d float32
  torch::Tensor growth_tracker_;  // 0-d int32
};

}  // namespace ddprun::train
