#pragma once
// Carrying out a PrecisionPlan with LibTorch: what the device can do, the autocast scope around
// forward and loss, and the fp32 matmul mode (TF32 or not) on CUDA.
#include <torch/torch.h>

#include <optional>

#include "precision.hpp"

namespace ddprun::train {

DeviceCaps detect_device_caps(const torch::Device& device);

// The autocast dtype of a plan: bf16 or fp16, nullopt for fp32 and tf32.
std::optional<at::ScalarType> autocast_dtype(const PrecisionPlan& plan);

// CUDA's fp32 matmuls: TF32 for precision tf32, full fp32 ("highest") otherwise. Nothing on CPU,
// where fp32 stays fp32.
void apply_matmul_precision(const PrecisionPlan& plan, const torch::Device& device);

// torch.autocast for C++: enables autocast on `device`'s type with `dtype` for its lifetime and
// restores the previous state after. Leaving the outermost scope clears the cast-weight cache,
// as Python's does: without that, the forward after an in-place optimizer step would reuse the
// previous step's low-precision copies of the weights. A scope with no dtype changes nothing.
class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, std::optional<at::ScalarType> dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_type_;
  bool active_ = false;
  bool was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

}  // namespace ddprun::train
