#include "gradient_clipping.hpp"

namespace ddprun::train {

torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& gradients, double max_norm) {
  torch::NoGradGuard no_grad;
  const auto norms = at::_foreach_norm(gradients, 2);
  const auto total = at::linalg_vector_norm(at::stack(norms), 2);
  const auto coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(gradients, coefficient);
  return total;
}

}  // namespace ddprun::train
