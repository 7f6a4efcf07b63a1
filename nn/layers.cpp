#include "nn/layers.h"

#include <cmath>
#include <limits>

#include "autograd/anomaly.h"
#include "kernels/backend.h"
#include "nn/recompute.h"

namespace glass {

namespace {

// Overwrites a parameter in place with N(0, std^2) draws from `gen`, recording no history.
void fill_normal(const Tensor& p, Generator& gen, double std) {
  NoGradGuard no_grad;
  kernels::backend(p).copy(randn(p.shape(), gen, 0, std, p.dtype(), p.device()), p);
}

void fill_value(const Tensor& p, double value) {
  NoGradGuard no_grad;
  kernels::backend(p).fill(p, value);
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias) {
  weight = register_parameter("weight", zeros({out_features, in_features}));
  if (has_bias) bias = register_parameter("bias", zeros({out_features}));
}

void Linear::reset(Generator& gen, double std) {
  fill_normal(weight, gen, std);
  if (bias.defined()) fill_value(bias, 0);
}

Embedding::Embedding(int64_t num, int64_t dim) {
  weight = register_parameter("weight", zeros({num, dim}));
}

void Embedding::reset(Generator& gen, double std) { fill_normal(weight, gen, std); }

LayerNorm::LayerNorm(int64_t dim, double eps) : eps(eps) {
  weight = register_parameter("weight", ones({dim}));
  bias = register_parameter("bias", zeros({dim}));
}

void LayerNorm::reset() {
  fill_value(weight, 1);
  fill_value(bias, 0);
}

Tensor causal_mask(int64_t T, Device device, DType dtype) {
  std::vector<double> mask(static_cast<size_t>(T * T), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = t + 1; s < T; ++s) mask[t * T + s] = -std::numeric_limits<double>::infinity();
  return cast(from_vector(mask, {T, T}, device), dtype);
}

Tensor causal_attention_dropout(const Tensor& q, const Tensor& k, const Tensor& v, double p,
                                Generator& gen, const Tensor& mask) {
  const int64_t T = q.size(-2), D = q.size(-1);
  // scores = q k^T / sqrt(D)   [B, H, T, T]
  Tensor scores = matmul(q, transpose(k, -2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
  // Causal mask: position t attends to positions <= t; the rest get -inf, i.e. probability 0.
  // Anomaly mode (GLASS_CHECK_NAN) takes these -inf for what they are: mask values.
  Tensor masked;
  {
    MaskValuesScope mask_values;
    masked = scores + (mask.defined() ? mask : causal_mask(T, q.device(), q.dtype()));
  }
  Tensor probs = softmax(masked);
  // Inverted dropout on the probabilities (kept ones scaled by 1/(1-p), rows not renormalised, as
  // nanoGPT), then mix the values.
  return matmul(dropout(probs, p, true, gen), v);
}

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, double dropout,
                                         Generator& gen)
    : n_embd(n_embd),
      n_head(n_head),
      c_attn(n_embd, 3 * n_embd),
      c_proj(n_embd, n_embd),
      attn_dropout(dropout, gen),
      resid_dropout(dropout, gen) {
  GLASS_CHECK(n_head > 0 && n_embd % n_head == 0,
              "CausalSelfAttention: n_embd {} is not divisible by n_head {}", n_embd, n_head);
  register_module("c_attn", c_attn);
  register_module("c_proj", c_proj);
  register_module("attn_dropout", attn_dropout);
  register_module("resid_dropout", resid_dropout);
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
  ModulePathScope in(path());
  GLASS_CHECK(x.dim() == 3 && x.size(2) == n_embd,
              "CausalSelfAttention: input {} is not [B, T, {}]", x.describe(), n_embd);
  const Tensor qkv = c_attn.forward(x);
  Tensor y;
  if (is_training() && attn_dropout.p > 0) {
    // q, k, v: thirds of c_attn's output, each viewed as heads [B, T, H, D] -> [B, H, T, D].
    const int64_t B = x.size(0), T = x.size(1), H = n_head, D = n_embd / n_head;
    std::vector<Tensor> heads = split(qkv, n_embd, 2);
    for (Tensor& t : heads) t = transpose(view(t, {B, T, H, D}), 1, 2);
    y = causal_attention_dropout(heads[0], heads[1], heads[2], attn_dropout.p,
                                 attn_dropout.generator(),
                                 cached_causal_mask(T, x.device(), heads[0].dtype()));
    // Heads back side by side: [B, H, T, D] -> [B, T, H, D] -> [B, T, C].
    y = reshape(transpose(y, 1, 2), {B, T, n_embd});
  } else {
    y = causal_attention(qkv, n_head, attention);  // reads qkv's layout in place, gives [B, T, C]
  }
  return resid_dropout.forward(c_proj.forward(y));
}

const Tensor& CausalSelfAttention::cached_causal_mask(int64_t T, Device device, DType dtype) const {
  std::lock_guard lock(masks_mu_);
  Tensor& mask = masks_[fmt::format("{}/{}/{}", device.str(), dtype_name(dtype), T)];
  if (!mask.defined()) {
    NoGradGuard no_grad;
    mask = causal_mask(T, device, dtype);
  }
  return mask;
}

MLP::MLP(int64_t n_embd, double dropout, Generator& gen)
    : c_fc(n_embd, 4 * n_embd), c_proj(4 * n_embd, n_embd), drop(dropout, gen) {
  register_module("c_fc", c_fc);
  register_module("c_proj", c_proj);
  register_module("dropout", drop);
}

Tensor MLP::forward(const Tensor& x) const {
  ModulePathScope in(path());
  // c_proj(gelu(c_fc(x))) as one op: its bias adds and GELU run inside the GEMMs.
  return drop.forward(mlp(x, c_fc.param(c_fc.weight), c_fc.param(c_fc.bias),
                          c_proj.param(c_proj.weight), c_proj.param(c_proj.bias), recompute_gelu));
}

Block::Block(int64_t n_embd, int64_t n_head, double dropout, Generator& gen)
    : ln_1(n_embd), attn(n_embd, n_head, dropout, gen), ln_2(n_embd), mlp(n_embd, dropout, gen) {
  register_module("ln_1", ln_1);
  register_module("attn", attn);
  register_module("ln_2", ln_2);
  register_module("mlp", mlp);
}

Tensor Block::forward(const Tensor& x) const {
  ModulePathScope in(path());
  const ResidualNorm h = ln_2.forward(x, attn.forward(ln_1.forward(x)));
  return h.residual + mlp.forward(h.normed);
}

ResidualNorm Block::forward(const Tensor& x, const Tensor& x_ln1, const LayerNorm& next_ln) const {
  ModulePathScope in(path());
  const ResidualNorm h = ln_2.forward(x, attn.forward(x_ln1));  // x + attn(ln_1(x)), ln_2 of it
  // h + mlp(ln_2(h)), and next_ln of it (next_ln names its own module path).
  const Tensor m = recompute_mlp ? checkpointed([this](const Tensor& x) { return mlp.forward(x); },
                                                h.normed, {&mlp.drop.generator()})
                                 : mlp.forward(h.normed);
  return next_ln.forward(h.residual, m);
}

}  // namespace glass
