#include "nn/gpt_decoder.h"

#include <cmath>
#include <numeric>

#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {

// The token and position embeddings of `ids` at positions start.. [1, n, C].
Tensor embed(const GPT& m, const std::vector<int32_t>& ids, int64_t start) {
  const auto n = static_cast<int64_t>(ids.size());
  const Device device = m.wte.weight.device();
  std::vector<int32_t> positions(ids.size());
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(start));
  return m.wte.forward(from_vector(ids, {1, n}, device)) +
         m.wpe.forward(from_vector(positions, {n}, device));
}

}  // namespace

void GPTDecoder::reserve(DType dtype, Device device) {
  const GPTConfig& c = model_.config;
  const int64_t C = c.n_embd, H = c.n_head;
  cache_.reserve(static_cast<int64_t>(model_.h.size()), H, H, c.block_size, C / H, dtype, device);
  if (!rows_.reserve(C, C, c.table_rows(), dtype, device)) return;
  mean_ = Tensor::empty({1}, accum_dtype(dtype), device);
  qkv_ = Tensor::empty({1, 3 * C}, dtype, device);
  pre_ = Tensor::empty({1, kernels::gemm_aux_ld(4 * C)}, dtype, device);
  fc_ = Tensor::empty({1, 4 * C}, dtype, device);
}

std::vector<float> GPTDecoder::prefill(const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  const GPTConfig& c = model_.config;
  const auto n = static_cast<int64_t>(ids.size());
  GLASS_CHECK(n >= 1 && n <= c.block_size, "GPTDecoder::prefill: {} tokens; 1..block_size={} fit",
              n, c.block_size);
  const int64_t C = c.n_embd, H = c.n_head;
  Tensor x = embed(model_, ids, 0);
  reserve(x.dtype(), x.device());
  for (size_t l = 0; l < model_.h.size(); ++l) {
    const Block& b = *model_.h[l];
    // The block's own causal attention on the fused qkv, as in GPT::forward ...
    const Tensor qkv = b.attn.c_attn.forward(b.ln_1.forward(x));
    x = x + b.attn.c_proj.forward(causal_attention(qkv, H, b.attn.attention));
    x = x + b.mlp.forward(b.ln_2.forward(x));
    // ... and its keys and values into the cache for the steps that follow.
    cache_.store(static_cast<int64_t>(l), qkv, n, 0, C, 2 * C);
  }
  pos_ = n;
  return logits_of_last(x);
}

std::vector<float> GPTDecoder::step(int32_t id) {
  NoGradGuard no_grad;  // param() of a model with compute copies would record otherwise
  const GPTConfig& c = model_.config;
  GLASS_CHECK(pos_ >= 1, "GPTDecoder::step: prefill a prompt first");
  GLASS_CHECK(pos_ < c.block_size, "GPTDecoder::step: position {} is past block_size={}", pos_,
              c.block_size);
  GLASS_CHECK(id >= 0 && id < c.vocab_size, "GPTDecoder::step: token id {} is outside 0..{}", id,
              c.vocab_size - 1);
  const int64_t C = c.n_embd, D = C / c.n_head;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const kernels::Backend& k = kernels::backend(rows_.x);
  // x = wte[id] + wpe[pos]
  k.binary(kernels::BinaryOp::add, rows_of(model_.wte.param(model_.wte.weight), 1, C, id * C),
           rows_of(model_.wpe.param(model_.wpe.weight), 1, C, pos_ * C), rows_.x);
  for (size_t l = 0; l < model_.h.size(); ++l) {
    const Block& b = *model_.h[l];
    const LayerNorm &ln_1 = b.ln_1, &ln_2 = b.ln_2;
    const Linear &c_attn = b.attn.c_attn, &c_proj = b.attn.c_proj;
    const Linear &c_fc = b.mlp.c_fc, &mlp_proj = b.mlp.c_proj;
    k.layernorm_forward(rows_.x, ln_1.param(ln_1.weight), ln_1.param(ln_1.bias), rows_.normed,
                        mean_, rows_.rstd, ln_1.eps);
    linear_into(rows_.normed, c_attn.param(c_attn.weight), c_attn.param(c_attn.bias), qkv_);
    cache_.store(static_cast<int64_t>(l), qkv_, 1, pos_, C, 2 * C);
    cache_.attend(static_cast<int64_t>(l), qkv_, pos_ + 1, scale, rows_.heads);
    linear_into(rows_.heads, c_proj.param(c_proj.weight), c_proj.param(c_proj.bias), rows_.delta);
    // h = x + attention, and ln_2 of it
    k.residual_layernorm_forward(rows_.x, rows_.delta, ln_2.param(ln_2.weight),
                                 ln_2.param(ln_2.bias), rows_.h, rows_.normed, mean_, rows_.rstd,
                                 ln_2.eps);
    // fc = gelu(ln_2(h) c_fc^T + b), its pre-activation in pre_, as the model's fused MLP
    kernels::GemmArgs g;
    g.a = rows_.normed;
    g.b = c_fc.param(c_fc.weight);
    g.c = fc_;
    g.bias = c_fc.param(c_fc.bias);
    g.trans_b = true;
    g.m = 1;
    g.n = 4 * C;
    g.k = C;
    g.lda = C;
    g.ldb = C;
    g.ldc = 4 * C;
    kernels::GemmEpilogue e;
    e.activation = kernels::GemmActivation::gelu;
    e.aux = pre_;
    e.aux_ld = pre_.size(1);
    k.gemm_epilogue(g, e);
    linear_into(fc_, mlp_proj.param(mlp_proj.weight), mlp_proj.param(mlp_proj.bias), rows_.delta);
    k.binary(kernels::BinaryOp::add, rows_.h, rows_.delta, rows_.x);  // x = h + mlp
  }
  k.layernorm_forward(rows_.x, model_.ln_f.param(model_.ln_f.weight),
                      model_.ln_f.param(model_.ln_f.bias), rows_.normed, mean_, rows_.rstd,
                      model_.ln_f.eps);
  linear_into(rows_.normed, model_.wte.param(model_.wte.weight), Tensor(), rows_.logits);
  ++pos_;
  return rows_.read_logits();
}

std::vector<float> GPTDecoder::logits_of_last(const Tensor& x) {
  const int64_t n = x.size(1);
  const Tensor last = n == 1 ? x : slice(x, 1, n - 1, n);
  return host_f32(linear(model_.ln_f.forward(last), model_.wte.param(model_.wte.weight)));
}

}  // namespace glass
