#include "fast_dropout.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <mutex>

namespace ddprun::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

uint64_t seed_from_default_generator() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

// mask[i] = 1 / (1 - p) where element i is kept, else 0.
torch::Tensor keep_mask(const torch::Tensor& like, double p) {
  auto mask = torch::empty(like.sizes(), like.options().requires_grad(false));
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  // A 32-bit uniform u keeps the element when u < (1 - p) * 2^32.
  const auto threshold = static_cast<uint64_t>(std::llround((1.0 - p) * 4294967296.0));
  const uint64_t seed = seed_from_default_generator();
  float* out = mask.data_ptr<float>();
  const int64_t n = mask.numel();
  auto kept = [&](uint64_t bits) { return bits < threshold ? scale : 0.0f; };
  for (int64_t pair = 0; 2 * pair < n; ++pair) {
    uint64_t z = seed + static_cast<uint64_t>(pair + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    out[2 * pair] = kept(z & 0xFFFFFFFFULL);
    if (2 * pair + 1 < n) {
      out[2 * pair + 1] = kept(z >> 32);
    }
  }
  return mask;
}

class DropoutFunction : public torch::autograd::Function<DropoutFunction> {
 public:
  static torch::Tensor forward(AutogradContext* context, const torch::Tensor& input, double p) {
    const auto mask = keep_mask(input, p);
    context->save_for_backward({mask});
    return input * mask;
  }

  static variable_list backward(AutogradContext* context, variable_list grad_outputs) {
    const auto mask = context->get_saved_variables()[0];
    return {grad_outputs[0] * mask, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor fast_dropout(const torch::Tensor& input, double p, bool training) {
  if (!training || p <= 0.0) {
    return input;
  }
  if (p >= 1.0 || !input.device().is_cpu() || input.scalar_type() != torch::kFloat) {
    return torch::dropout(input, p, training);
  }
  return DropoutFunction::apply(input, p);
}

}  // namespace ddprun::train
