#include "gpt_model.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "fast_dropout.hpp"

namespace ddprun::train {

namespace F = torch::nn::functional;

namespace {

// ATen's linear folds a 3-D input into one addmm with the bias, as Python's nn.Linear does;
// the C++ frontend's F::linear (LibTorch 1.13) runs matmul and then a separate bias add, whose
// zero-filled product buffer costs about a third of a training step on small models.
torch::Tensor fused_linear(const torch::Tensor& x, const torch::nn::LinearImpl& layer) {
  return at::linear(x, layer.weight, layer.bias);
}

}  // namespace

EmbeddingStemImpl::EmbeddingStemImpl(const GptShape& shape) {
  tok_emb_ = register_module("tok_emb", torch::nn::Embedding(shape.vocab_size, shape.n_embd));
  pos_emb_ = register_parameter("pos_emb", torch::zeros({1, shape.block_size, shape.n_embd}));
  drop_ = register_module("drop", torch::nn::Dropout(shape.embd_pdrop));
}

torch::Tensor EmbeddingStemImpl::forward(const torch::Tensor& idx) {
  const int64_t length = idx.size(1);
  TORCH_CHECK(length <= pos_emb_.size(1), "sequence of ", length, " tokens exceeds block_size ",
              pos_emb_.size(1));
  return fast_dropout(tok_emb_(idx) + pos_emb_.narrow(1, 0, length), drop_->options.p(),
                      is_training());
}

SelfAttentionImpl::SelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout)
    : n_head_(n_head), dropout_(dropout) {
  in_proj_weight_ = register_parameter("in_proj_weight", torch::empty({3 * n_embd, n_embd}));
  in_proj_bias_ = register_parameter("in_proj_bias", torch::zeros({3 * n_embd}));
  out_proj_ = register_module("out_proj", torch::nn::Linear(n_embd, n_embd));
  // nn.MultiheadAttention._reset_parameters; minGPT's _init_weights never touches in_proj_weight.
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(in_proj_weight_);
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0);
  const int64_t length = x.size(1);
  const int64_t width = x.size(2);
  const int64_t head_width = width / n_head_;
  // (3, batch, heads, length, head_width): the layout scaled_dot_product_attention takes, so that
  // CUDA picks a flash, cuDNN or memory-efficient kernel and the CPU its own.
  const auto qkv = at::linear(x, in_proj_weight_, in_proj_bias_)
                       .view({batch, length, 3, n_head_, head_width})
                       .permute({2, 0, 3, 1, 4});
  const auto mixed = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], /*attn_mask=*/{},
                                                      is_training() ? dropout_ : 0.0,
                                                      /*is_causal=*/true)
                         .transpose(1, 2)
                         .reshape({batch, length, width});
  return fused_linear(mixed, *out_proj_);
}

AttentionLayerImpl::AttentionLayerImpl(const GptShape& shape) {
  attn_ = register_module("attn", SelfAttention(shape.n_embd, shape.n_head, shape.attn_pdrop));
  c_proj_ = register_module("c_proj", torch::nn::Linear(shape.n_embd, shape.n_embd));
  resid_drop_ = register_module("resid_drop", torch::nn::Dropout(shape.resid_pdrop));
  mask_ = register_buffer("mask", torch::tril(torch::ones({shape.block_size, shape.block_size}))
                                      .view({1, 1, shape.block_size, shape.block_size}));
}

torch::Tensor AttentionLayerImpl::forward(const torch::Tensor& x) {
  return fast_dropout(fused_linear(attn_(x), *c_proj_), resid_drop_->options.p(), is_training());
}

BlockImpl::BlockImpl(const GptShape& shape) {
  ln1_ = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({shape.n_embd})));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({shape.n_embd})));
  attn_ = register_module("attn", AttentionLayer(shape));
  mlp_ = register_module(
      "mlp",
      torch::nn::Sequential(torch::nn::Linear(shape.n_embd, 4 * shape.n_embd), torch::nn::GELU(),
                            torch::nn::Linear(4 * shape.n_embd, shape.n_embd),
                            torch::nn::Dropout(shape.resid_pdrop)));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x) {
  auto y = x + attn_(ln1_(x));
  // mlp is a Sequential only so that parameter names match minGPT-ddp's (mlp.0, mlp.2).
  auto hidden = mlp_[1]->as<torch::nn::GELUImpl>()->forward(
      fused_linear(ln2_(y), *mlp_[0]->as<torch::nn::Linear>()));
  return y + fast_dropout(fused_linear(hidden, *mlp_[2]->as<torch::nn::Linear>()),
                          mlp_[3]->as<torch::nn::Dropout>()->options.p(), is_training());
}

GptImpl::GptImpl(const GptShape& shape) : shape_(shape) {
  emb_stem_ = register_module("emb_stem", EmbeddingStem(shape));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t k = 0; k < shape.n_layer; ++k) {
    blocks_->push_back(Block(shape));
  }
  ln_f_ =
      register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({shape.n_embd})));
  head_ = register_module(
      "head",
      torch::nn::Linear(torch::nn::LinearOptions(shape.n_embd, shape.vocab_size).bias(false)));
  initialise();
}

void GptImpl::initialise() {
  torch::NoGradGuard no_grad;
  // minGPT's _init_weights, applied to every Linear (MHA's out_proj included) and Embedding.
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, 0.02);
      if (linear->bias.defined()) {
        linear->bias.zero_();
      }
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0.0, 0.02);
    } else if (auto* norm = module->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
  // GPT-2's scaled init of the residual projections.
  const double std = 0.02 / std::sqrt(2.0 * static_cast<double>(shape_.n_layer));
  for (auto& item : named_parameters()) {
    const auto& name = item.key();
    if (name.size() >= 13 && name.compare(name.size() - 13, 13, "c_proj.weight") == 0) {
      item.value().normal_(0.0, std);
    }
  }
}

torch::Tensor GptImpl::forward(const torch::Tensor& idx) {
  auto x = emb_stem_(idx);
  for (const auto& block : *blocks_) {
    x = block->as<BlockImpl>()->forward(x);
  }
  return fused_linear(ln_f_(x), *head_);
}

torch::Tensor language_model_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
                          F::CrossEntropyFuncOptions().ignore_index(-1));
}

ParameterGroups optimizer_parameter_groups(const GptImpl& model) {
  std::set<std::string> decay;
  for (const auto& item : model.named_modules()) {
    if (item.value()->as<torch::nn::Linear>() != nullptr) {
      decay.insert(item.key() + ".weight");
    }
  }
  ParameterGroups groups;
  for (const auto& item : model.named_parameters()) {
    const auto& name = item.key();
    const bool in_proj =
        name.size() >= 14 && name.compare(name.size() - 14, 14, "in_proj_weight") == 0;
    (decay.count(name) != 0 || in_proj ? groups.decay : groups.no_decay).push_back(name);
  }
  std::sort(groups.decay.begin(), groups.decay.end());
  std::sort(groups.no_decay.begin(), groups.no_decay.end());
  return groups;
}

}  // namespace ddprun::train
