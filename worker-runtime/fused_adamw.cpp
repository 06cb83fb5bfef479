#include "fused_adamw.hpp"

namespace ddprun::train {
namespace {

torch::optim::AdamWParamState& state_of(torch::optim::Optimizer& optimizer,
                                        const torch::Tensor& parameter) {
  auto& slot = optimizer.state()[parameter.unsafeGetTensorImpl()];
  if (!slot) {
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(parameter, at::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(parameter, at::MemoryFormat::Preserve));
    slot = std::move(fresh);
  }
  return static_cast<torch::optim::AdamWParamState&>(*slot);
}

}  // namespace

torch::optim::AdamWParamState& FusedAdamW::param_state(const torch::Tensor& parameter) {
  return state_of(*this, parameter);
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  TORCH_CHECK(!closure, "FusedAdamW takes no closure");
  step_unless(std::nullopt);
  return {};
}

void FusedAdamW::step_unless(const std::optional<torch::Tensor>& found_inf) {
  torch::NoGradGuard no_grad;
  const bool build_counts = step_counts_.empty();
  if (build_counts) {
    step_counts_.resize(param_groups().size());
  }
  for (size_t g = 0; g < param_groups().size(); ++g) {
    auto& group = param_groups()[g];
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    TORCH_CHECK(!options.amsgrad(), "FusedAdamW does not implement amsgrad");
    std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, counts;
    auto& group_counts = step_counts_[g];
    for (size_t k = 0; k < group.params().size(); ++k) {
      const auto& param = group.params()[k];
      auto& state = state_of(*this, param);
      if (build_counts) {
        group_counts.push_back(torch::full({}, static_cast<double>(state.step()),
                                           param.options().dtype(torch::kFloat)));
      }
      // Parameters without gradients keep their moments and counts, as in PyTorch.
      if (!param.grad().defined()) {
        continue;
      }
      params.push_back(param);
      grads.push_back(param.grad());
      exp_avgs.push_back(state.exp_avg());
      exp_avg_sqs.push_back(state.exp_avg_sq());
      counts.push_back(group_counts[k]);
      state.step(state.step() + 1);
    }
    if (params.empty()) {
      continue;
    }
    // As AdamW(fused=True): counts go up before the kernel, which reads them for the bias
    // correction, and come back down where found_inf says the step was skipped.
    at::_foreach_add_(counts, 1.0);
    at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, counts,
                      options.lr(), std::get<0>(options.betas()), std::get<1>(options.betas()),
                      options.weight_decay(), options.eps(), /*amsgrad=*/false,
                      /*maximize=*/false, /*grad_scale=*/std::nullopt, found_inf);
    if (found_inf) {
      at::_foreach_sub_(counts, std::vector<torch::Tensor>(counts.size(), *found_inf));
      steps_skippable_ = true;
    }
  }
}

void FusedAdamW::sync_step_counts() {
  if (!steps_skippable_ || step_counts_.empty()) {
    return;  // every step was taken: the host counts are exact
  }
  for (size_t g = 0; g < param_groups().size(); ++g) {
    const auto& params = param_groups()[g].params();
    for (size_t k = 0; k < params.size(); ++k) {
      state_of(*this, params[k]).step(static_cast<int64_t>(step_counts_[g][k].item<double>()));
    }
  }
}

torch::Tensor FusedAdamW::step_count(const torch::Tensor& parameter) const {
  for (size_t g = 0; steps_skippable_ && g < step_counts_.size(); ++g) {
    const auto& params = param_groups()[g].params();
    for (size_t k = 0; k < params.size(); ++k) {
      if (params[k].unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl()) {
        return step_counts_[g][k];
      }
    }
  }
  const auto& host = static_cast<const torch::optim::AdamWParamState&>(
      *state().at(parameter.unsafeGetTensorImpl()));
  return torch::tensor(static_cast<float>(host.step()));
}

void FusedAdamW::forget_step_counts() {
  step_counts_.clear();
  steps_skippable_ = false;
}

}  // namespace ddprun::train
