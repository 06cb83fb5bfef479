#include "mixed_precision.hpp"

#include <ATen/autocast_mode.h>
#include <ATen/cpu/Utils.h>
// USE_C10D_NCCL comes with a CUDA LibTorch (its torch_cuda target defines it), as in
// collectives.cpp: the only build where a CUDA device can be asked anything.
#ifdef USE_C10D_NCCL
#include <ATen/cuda/CUDAContext.h>
#endif

namespace ddprun::train {
namespace {

bool cpu_has(const std::unordered_map<std::string, c10::IValue>& capabilities, const char* name) {
  const auto it = capabilities.find(name);
  return it != capabilities.end() && it->second.isBool() && it->second.toBool();
}

}  // namespace

DeviceCaps detect_device_caps(const torch::Device& device) {
  DeviceCaps caps;
#ifdef USE_C10D_NCCL
  if (device.is_cuda()) {
    const auto* properties = at::cuda::getDeviceProperties(device.index());
    caps.cuda = true;
    caps.compute_major = properties->major;
    caps.compute_minor = properties->minor;
    caps.native_bf16 = properties->major >= 8;
    caps.native_fp16 = true;
    return caps;
  }
#endif
  (void)device;
  const auto capabilities = at::cpu::get_cpu_capabilities();
  caps.native_bf16 = cpu_has(capabilities, "avx512_bf16") || cpu_has(capabilities, "amx_bf16");
  caps.native_fp16 = cpu_has(capabilities, "avx512_fp16") || cpu_has(capabilities, "amx_fp16");
  return caps;
}

std::optional<at::ScalarType> autocast_dtype(const PrecisionPlan& plan) {
  switch (plan.precision) {
    case Precision::kBf16:
      return at::kBFloat16;
    case Precision::kFp16:
      return at::kHalf;
    default:
      return std::nullopt;
  }
}

void apply_matmul_precision(const PrecisionPlan& plan, const torch::Device& device) {
  if (device.is_cuda()) {
    at::globalContext().setFloat32MatmulPrecision(plan.precision == Precision::kTf32 ? "high"
                                                                                     : "highest");
  }
}

AutocastScope::AutocastScope(const torch::Device& device, std::optional<at::ScalarType> dtype)
    : device_type_(device.type()) {
  if (!dtype) {
    return;
  }
  active_ = true;
  was_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, *dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) {
    return;
  }
  if (at::autocast::decrement_nesting() == 0) {
    at::autocast::clear_cache();
  }
  at::autocast::set_autocast_enabled(device_type_, was_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

}  // namespace ddprun::train
