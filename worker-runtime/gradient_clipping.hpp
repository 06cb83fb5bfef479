#pragma once
// torch.nn.utils.clip_grad_norm_'s foreach path, without its host synchronisation: one norm per
// gradient in one kernel, the total norm and the clip coefficient stay on the device, and every
// gradient is scaled by min(1, max_norm / (total + 1e-6)) in one more.
#include <torch/torch.h>

#include <vector>

namespace ddprun::train {

// Returns the total norm (0-d, on the device) before clipping.
torch::Tensor clip_gradient_norm(const std::vector<torch::Tensor>& gradients, double max_norm);

}  // namespace ddprun::train
