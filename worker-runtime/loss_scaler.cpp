#include "loss_scaler.hpp"

namespace ddprun::train {

LossScaler::LossScaler(const torch::Device& device, const LossScalerSettings& settings)
    : settings_(settings),
      scale_(torch::full({}, settings.init_scale,
                         torch::TensorOptions().dtype(torch::kFloat).device(device))),
      growth_tracker_(torch::zeros({}, torch::TensorOptions().dtype(torch::kInt).device(device))) {}

torch::Tensor LossScaler::scale(const torch::Tensor& loss) const {
  return loss * scale_;
}

torch::Tensor LossScaler::unscale(const std::vector<torch::Tensor>& gradients) const {
  // As GradScaler.unscale_: the reciprocal in double, then float.
  const auto inverse_scale = scale_.to(torch::kDouble).reciprocal().to(torch::kFloat);
  auto found_inf = torch::zeros({}, scale_.options());
  at::_amp_foreach_non_finite_check_and_unscale_(gradients, found_inf, inverse_scale);
  return found_inf;
}

void LossScaler::update(const torch::Tensor& found_inf) {
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf, settings_.growth_factor,
                         settings_.backoff_factor, settings_.growth_interval);
}

double LossScaler::current_scale() const {
  return scale_.item<double>();
}

int64_t LossScaler::growth_tracker() const {
  return growth_tracker_.item<int64_t>();
}

}  // namespace ddprun::train
