// The layers a GPT is made of, each a Module with nanoGPT's parameter names.
//
// Parameters are created zero-filled (LayerNorm weights one) so that a fresh module is
// deterministic; reset(gen, std) draws the random ones. GPT::init calls the resets in a fixed
// order, which makes initialisation a pure function of the generator's seed.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "autograd/ops.h"
#include "nn/module.h"

namespace glass {

// Every forward reads its parameters through Module::param (their compute copies under mixed
// precision).

// y = x @ weight^T + bias; weight [out, in], bias [out] (undefined when bias = false).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) const {
    ModulePathScope in(path());
    return linear(x, param(weight), bias.defined() ? param(bias) : bias);
  }
  // weight ~ N(0, std^2), bias = 0.
  void reset(Generator& gen, double std);

  Tensor weight, bias;
};

// A lookup table: ids i32 [...] -> weight rows [..., dim]; weight [num, dim].
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim);
  Tensor forward(const Tensor& ids) const {
    ModulePathScope in(path());
    return embedding(ids, param(weight));
  }
  void reset(Generator& gen, double std);  // weight ~ N(0, std^2)

  Tensor weight;
};

// Normalises the last dimension, then scales and shifts: weight, bias [dim].
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  Tensor forward(const Tensor& x) const {
    ModulePathScope in(path());
    return layer_norm(x, param(weight), param(bias), eps);
  }
  // The residual add before this LayerNorm, fused with it: {x + delta, forward(x + delta)}.
  ResidualNorm forward(const Tensor& x, const Tensor& delta) const {
    ModulePathScope in(path());
    return residual_layer_norm(x, delta, param(weight), param(bias), eps);
  }
  void reset();  // weight = 1, bias = 0

  Tensor weight, bias;
  double eps;
};

// Inverted dropout with probability p while training, drawing from `gen`; identity in eval mode.
class Dropout : public Module {
 public:
  Dropout(double p, Generator& gen) : p(p), gen_(&gen) {}
  Tensor forward(const Tensor& x) const {
    ModulePathScope in(path());
    return dropout(x, p, is_training(), *gen_);
  }
  Generator& generator() const { return *gen_; }

  double p;

 private:
  Generator* gen_;
};

// Causal self-attention with the softmax probabilities dropped out with probability p, written
// with plain ops (scores, mask, softmax, dropout, matmul): the fused causal_attention has no
// dropout. q, k, v [B, H, T, D] -> [B, H, T, D]. With p == 0 it computes what causal_attention
// does. `mask`: causal_mask(T, ...) of q's device and dtype, made (uploaded) here when undefined.
Tensor causal_attention_dropout(const Tensor& q, const Tensor& k, const Tensor& v, double p,
                                Generator& gen, const Tensor& mask = Tensor());
// The additive causal mask [T, T]: 0 where position t may attend to s (s <= t), -inf elsewhere.
Tensor causal_mask(int64_t T, Device device, DType dtype);

// Multi-head causal self-attention on x [B, T, C]:
//   c_attn [3C, C] -> qkv [B, T, 3C] -> causal_attention(qkv, n_head) -> [B, T, C] -> c_proj [C, C]
//   -> dropout.
// `attention` picks the kernel behind causal_attention (naive, flash, cudnn; automatic by
// default: autograd/ops.h). Attention probabilities are dropped out only while training with
// dropout > 0; then q, k, v are split into heads [B, H, T, D] and the unfused
// causal_attention_dropout runs instead.
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, double dropout, Generator& gen);
  Tensor forward(const Tensor& x) const;

  int64_t n_embd, n_head;
  AttentionKernel attention = AttentionKernel::automatic;
  Linear c_attn, c_proj;
  Dropout attn_dropout, resid_dropout;

 private:
  // causal_mask for the dropout path, uploaded once per (device, dtype, T) and kept: a training
  // step uploads nothing but its batch, and a CUDA graph capture may not upload at all.
  const Tensor& cached_causal_mask(int64_t T, Device device, DType dtype) const;
  mutable std::mutex masks_mu_;
  mutable std::map<std::string, Tensor> masks_;
};

// x -> c_fc [4C, C] -> GELU (tanh) -> c_proj [C, 4C] -> dropout.
class MLP : public Module {
 public:
  MLP(int64_t n_embd, double dropout, Generator& gen);
  Tensor forward(const Tensor& x) const;

  Linear c_fc, c_proj;
  Dropout drop;
  bool recompute_gelu = false;  // --recompute gelu: the GELU's output is rebuilt in backward
};

// A pre-LayerNorm transformer block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)).
// Each residual add runs fused with the LayerNorm that reads its result (residual_layer_norm):
// x + attn(...) with ln_2, and x + mlp(...) with the LayerNorm after the block (the next block's
// ln_1, or the model's ln_f), which is why the second form takes that LayerNorm.
class Block : public Module {
 public:
  Block(int64_t n_embd, int64_t n_head, double dropout, Generator& gen);
  Tensor forward(const Tensor& x) const;
  // x: the residual stream, x_ln1 = ln_1(x) (computed by the caller, usually fused with the add
  // before). Returns the block's output stream and next_ln of it.
  ResidualNorm forward(const Tensor& x, const Tensor& x_ln1, const LayerNorm& next_ln) const;

  LayerNorm ln_1;
  CausalSelfAttention attn;
  LayerNorm ln_2;
  MLP mlp;
  bool recompute_mlp = false;  // --recompute mlp: the MLP keeps its input, re-runs in backward
};

}  // namespace glass
