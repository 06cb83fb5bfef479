#pragma once
// Which arithmetic a run trains in, decided once at start from trainer_config.precision,
// trainer_config.use_amp and what the device can do. Pure: the caller detects the device
// (mixed_precision.hpp) and applies the plan; this file only decides and explains.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::train {

enum class Precision { kAuto, kFp32, kTf32, kBf16, kFp16 };

std::string_view precision_name(Precision precision);
// "auto", "fp32", "tf32", "bf16", "fp16"; nullopt for anything else.
std::optional<Precision> parse_precision(std::string_view text);
std::vector<std::string> precision_names();

struct DeviceCaps {
  bool cuda = false;
  int compute_major = 0;  // CUDA compute capability; 0 on CPU
  int compute_minor = 0;
  bool native_bf16 = false;  // CPU: AVX512-BF16 or AMX-BF16 (CUDA: compute capability >= 8.0)
  bool native_fp16 = false;  // CPU: AVX512-FP16 or AMX-FP16 (CUDA: always)
};

struct PrecisionPlan {
  Precision precision = Precision::kFp32;  // never kAuto
  bool autocast = false;                   // bf16 and fp16: autocast over forward and loss
  bool loss_scaling = false;               // fp16: a dynamic loss scaler (GradScaler's rules)
  std::string reason;                      // why, for the start line
};

// Throws ConfigError, naming the key and the device, when the requested precision cannot run
// here (tf32 off CUDA or before compute capability 8.0, bf16 on a GPU before 8.0, fp16 on a CPU
// without native fp16).
PrecisionPlan plan_precision(Precision requested, bool use_amp, const DeviceCaps& caps);

}  // namespace ddprun::train
