#pragma once
// Text from a trained model, as minGPT's GPT.generate(): the context cropped to block_size, the
// last position's logits divided by the temperature, optionally cut to the top k, then a draw
// from the softmax (or its argmax when greedy), one token at a time. No key-value cache: the
// model's context is at most block_size tokens (64 by default), so each new token re-runs at
// most that many positions, and the forward stays the training one.
#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "gpt_model.hpp"

namespace ddprun::train {

struct GenerationOptions {
  int64_t tokens = 200;
  double temperature = 1.0;  // > 0
  int64_t top_k = 0;         // 0: the whole vocabulary
  bool greedy = false;
  uint64_t seed = 1337;  // draws come from a CPU generator: the same text on any device
};

// Returns the new tokens only. `prompt` must not be empty. The model is put in eval mode for the
// call and given back in the mode it was in; autocast (bf16, fp16) as in training when given.
std::vector<int64_t> generate(GptImpl& model, const std::vector<int64_t>& prompt,
                              const GenerationOptions& options,
                              std::optional<at::ScalarType> autocast = std::nullopt);

}  // namespace ddprun::train
