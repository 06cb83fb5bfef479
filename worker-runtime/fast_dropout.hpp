#pragma once

#include <torch/torch.h>

namespace ddprun::train {

// Inverted dropout (keep each element with probability 1 - p, scale kept ones by 1 / (1 - p)),
// as torch::dropout, but with a cheaper keep mask on CPU: LibTorch 1.13's CPU bernoulli_ draws
// one 64-bit Mersenne-Twister double per element under a lock, a sixth of a small model's
// training step. Here one draw of the default generator seeds a SplitMix64 stream that gives
// two 32-bit uniforms per step, so the mask stays a pure function of torch::manual_seed (exact
// resume keeps working). Other devices and dtypes use torch::dropout.
torch::Tensor fast_dropout(const torch::Tensor& input, double p, bool training);

}  // namespace ddprun::train
