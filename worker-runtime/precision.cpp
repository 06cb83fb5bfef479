#include "precision.hpp"

#include <array>
#include <utility>

#include "config_error.hpp"

namespace ddprun::train {
namespace {

constexpr auto kNames = std::to_array<std::pair<Precision, std::string_view>>({
    {Precision::kAuto, "auto"},
    {Precision::kFp32, "fp32"},
    {Precision::kTf32, "tf32"},
    {Precision::kBf16, "bf16"},
    {Precision::kFp16, "fp16"},
});

std::string device_text(const DeviceCaps& caps) {
  if (!caps.cuda) {
    return "this CPU";
  }
  return "this GPU (compute capability " + std::to_string(caps.compute_major) + "." +
         std::to_string(caps.compute_minor) + ")";
}

bool ampere_or_later(const DeviceCaps& caps) {
  return caps.cuda && caps.compute_major >= 8;
}

PrecisionPlan plan(Precision precision, std::string reason) {
  PrecisionPlan p;
  p.precision = precision;
  p.autocast = precision == Precision::kBf16 || precision == Precision::kFp16;
  p.loss_scaling = precision == Precision::kFp16;
  p.reason = std::move(reason);
  return p;
}

// use_amp with precision=auto: what minGPT-ddp's autocast would want, on this device.
PrecisionPlan plan_for_use_amp(const DeviceCaps& caps) {
  if (caps.cuda) {
    return ampere_or_later(caps)
               ? plan(Precision::kBf16, "use_amp on " + device_text(caps) + ", which has bf16")
               : plan(Precision::kFp16, "use_amp on " + device_text(caps) +
                                            ", which has no bf16: fp16 with loss scaling");
  }
  if (caps.native_bf16) {
    return plan(Precision::kBf16, "use_amp on " + device_text(caps) + ", which has native bf16");
  }
  return plan(Precision::kFp32,
              "use_amp, but this CPU has no native bf16 (AVX512-BF16 or AMX-BF16), where bf16 "
              "autocast runs several times slower than fp32: training in fp32 "
              "(trainer_config.precision=bf16 forces it)");
}

}  // namespace

std::string_view precision_name(Precision precision) {
  for (const auto& [value, name] : kNames) {
    if (value == precision) {
      return name;
    }
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view text) {
  for (const auto& [value, name] : kNames) {
    if (name == text) {
      return value;
    }
  }
  return std::nullopt;
}

std::vector<std::string> precision_names() {
  std::vector<std::string> names;
  for (const auto& entry : kNames) {
    names.emplace_back(entry.second);
  }
  return names;
}

PrecisionPlan plan_precision(Precision requested, bool use_amp, const DeviceCaps& caps) {
  const std::string asked = "trainer_config.precision=" + std::string(precision_name(requested));
  const std::string overriding = use_amp ? " (instead of use_amp's choice)" : "";
  const auto refuse = [&](const std::string& why) -> PrecisionPlan {
    throw ConfigError(asked + " cannot run on " + device_text(caps) + ": " + why);
  };
  switch (requested) {
    case Precision::kAuto:
      return use_amp ? plan_for_use_amp(caps) : plan(Precision::kFp32, "use_amp is false");
    case Precision::kFp32:
      return plan(Precision::kFp32, asked + overriding);
    case Precision::kTf32:
      if (!ampere_or_later(caps)) {
        return refuse(
            "TF32 is a tensor-core mode of NVIDIA GPUs of compute capability 8.0 and later; use "
            "fp32 (or bf16)");
      }
      return plan(Precision::kTf32, asked + overriding);
    case Precision::kBf16:
      if (caps.cuda && !ampere_or_later(caps)) {
        return refuse("bf16 needs compute capability 8.0 or later; use fp16 or fp32");
      }
      if (!caps.cuda && !caps.native_bf16) {
        return plan(Precision::kBf16, asked + overriding +
                                          "; this CPU has no native bf16, so it is emulated and "
                                          "slower than fp32");
      }
      return plan(Precision::kBf16, asked + overriding);
    case Precision::kFp16:
      if (!caps.cuda && !caps.native_fp16) {
        return refuse(
            "it has no native fp16 (AVX512-FP16 or AMX-FP16); use bf16 or fp32 on CPUs, fp16 on "
            "GPUs");
      }
      return plan(Precision::kFp16, asked + overriding + ", with loss scaling");
  }
  return refuse("unknown precision");
}

}  // namespace ddprun::train
