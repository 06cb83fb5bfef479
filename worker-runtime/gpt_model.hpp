#pragma once
// minGPT-ddp's model (pytorch/examples distributed/minGPT-ddp/mingpt/model.py) with the same
// module tree, parameter names and initialisation, but causal: the example adds tril(ones) to
// the attention logits, which masks nothing. Attention is scaled_dot_product_attention with
// is_causal; the `mask` buffer keeps the example's tril(ones) values only so that state_dicts
// stay interchangeable.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model_dims.hpp"

namespace ddprun::train {

struct GptShape : ModelDims {
  double embd_pdrop = 0.0;
  double resid_pdrop = 0.0;
  double attn_pdrop = 0.0;
};

// tok_emb + learned pos_emb (initialised to zero), then dropout.
class EmbeddingStemImpl : public torch::nn::Module {
 public:
  explicit EmbeddingStemImpl(const GptShape& shape);
  torch::Tensor forward(const torch::Tensor& idx);

 private:
  torch::nn::Embedding tok_emb_{nullptr};
  torch::Tensor pos_emb_;
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(EmbeddingStem);

// torch.nn.MultiheadAttention's parameters (in_proj_weight, in_proj_bias, out_proj) computing
// batch-first causal self-attention, with the example's attention dropout while training.
class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t n_head_;
  double dropout_;
  torch::Tensor in_proj_weight_;
  torch::Tensor in_proj_bias_;
  torch::nn::Linear out_proj_{nullptr};
};
TORCH_MODULE(SelfAttention);

// minGPT-ddp's MultiheadAttentionLayer: attention, then the extra c_proj and residual dropout.
class AttentionLayerImpl : public torch::nn::Module {
 public:
  explicit AttentionLayerImpl(const GptShape& shape);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  SelfAttention attn_{nullptr};
  torch::nn::Linear c_proj_{nullptr};
  torch::nn::Dropout resid_drop_{nullptr};
  torch::Tensor mask_;  // (1, 1, block, block) tril(ones), persistent as in the example
};
TORCH_MODULE(AttentionLayer);

class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const GptShape& shape);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::LayerNorm ln1_{nullptr};
  torch::nn::LayerNorm ln2_{nullptr};
  AttentionLayer attn_{nullptr};
  torch::nn::Sequential mlp_{nullptr};
};
TORCH_MODULE(Block);

class GptImpl : public torch::nn::Module {
 public:
  explicit GptImpl(const GptShape& shape);
  // idx: (B, T) token ids with T <= block_size; returns logits (B, T, vocab).
  torch::Tensor forward(const torch::Tensor& idx);
  const GptShape& shape() const { return shape_; }

 private:
  void initialise();

  GptShape shape_;
  EmbeddingStem emb_stem_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::nn::Linear head_{nullptr};
};
TORCH_MODULE(Gpt);

// Mean cross entropy over all positions (ignore_index -1, as in the example).
torch::Tensor language_model_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// minGPT-ddp's create_optimizer grouping: Linear weights and in_proj_weight decay, everything else
// (biases, LayerNorm, embeddings, pos_emb) does not. Each list is sorted by full name, which fixes
// the indices of PyTorch's optimizer state_dict.
struct ParameterGroups {
  std::vector<std::string> decay;
  std::vector<std::string> no_decay;
};
ParameterGroups optimizer_parameter_groups(const GptImpl& model);

}  // namespace ddprun::train
