#pragma once
// The dimensions of a minGPT model: what a snapshot must match to be loaded into it. Shared by
// the model (GptShape adds the dropout rates) and the resume record, which stays free of LibTorch.
#include <cstdint>

namespace ddprun::train {

struct ModelDims {
  friend bool operator==(const ModelDims&, const ModelDims&) = default;

  int64_t vocab_size = 0;
  int64_t block_size = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_embd = 0;
};

}  // namespace ddprun::train
