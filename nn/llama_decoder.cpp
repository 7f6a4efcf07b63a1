#include "nn/llama_decoder.h"

#include <cmath>

#include "kernels/backend.h"

namespace glass {

void LlamaDecoder::reserve(DType dtype, Device device) {
  const GPTConfig& c = model_.config;
  const int64_t C = c.n_embd, H = c.n_head, Hkv = c.kv_heads(), D = c.head_dim(), F = c.ffn();
  cache_.reserve(static_cast<int64_t>(model_.model.layers.size()), H, Hkv, c.block_size, D, dtype,
                 device);
  if (!rows_.reserve(C, H * D, c.table_rows(), dtype, device)) return;
  qkv_ = Tensor::empty({1, 1, (H + 2 * Hkv) * D}, dtype, device);
  gate_up_ = Tensor::empty({1, 2 * F}, dtype, device);
  act_ = Tensor::empty({1, F}, dtype, device);
}

std::vector<float> LlamaDecoder::prefill(const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  const GPTConfig& c = model_.config;
  const auto n = static_cast<int64_t>(ids.size());
  GLASS_CHECK(n >= 1 && n <= c.block_size, "LlamaDecoder::prefill: {} tokens; 1..block_size={} fit",
              n, c.block_size);
  const int64_t H = c.n_head, Hkv = c.kv_heads(), D = c.head_dim();
  Tensor x = model_.model.embed_tokens.forward(from_vector(ids, {1, n}, model_.device()));
  reserve(x.dtype(), x.device());
  for (size_t l = 0; l < model_.model.layers.size(); ++l) {
    const LlamaBlock& b = *model_.model.layers[l];
    // The block's own causal attention on the rotated qkv, as in Llama::forward ...
    const Tensor qkv = b.self_attn.rotated_qkv(b.input_layernorm.forward(x), 0);
    const Tensor y = causal_attention(qkv, H, Hkv, b.self_attn.attention);
    const Tensor h = x + b.self_attn.o_proj.forward(y);
    x = h + b.mlp.forward(b.post_attention_layernorm.forward(h));
    // ... and its keys and values into the cache for the steps that follow.
    cache_.store(static_cast<int64_t>(l), qkv, n, 0, H * D, (H + Hkv) * D);
  }
  pos_ = n;
  return logits_of_last(x);
}

std::vector<float> LlamaDecoder::step(int32_t id) {
  NoGradGuard no_grad;  // param() of a model with compute copies would record otherwise
  const GPTConfig& c = model_.config;
  GLASS_CHECK(pos_ >= 1, "LlamaDecoder::step: prefill a prompt first");
  GLASS_CHECK(pos_ < c.block_size, "LlamaDecoder::step: position {} is past block_size={}", pos_,
              c.block_size);
  GLASS_CHECK(id >= 0 && id < c.vocab_size, "LlamaDecoder::step: token id {} is outside 0..{}", id,
              c.vocab_size - 1);
  const int64_t C = c.n_embd, H = c.n_head, Hkv = c.kv_heads(), D = c.head_dim();
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const kernels::Backend& k = kernels::backend(rows_.x);
  const Embedding& embed = model_.model.embed_tokens;
  k.copy(rows_of(embed.param(embed.weight), 1, C, id * C), rows_.x);  // x = embed_tokens[id]
  for (size_t l = 0; l < model_.model.layers.size(); ++l) {
    const LlamaBlock& b = *model_.model.layers[l];
    const RMSNorm &norm_1 = b.input_layernorm, &norm_2 = b.post_attention_layernorm;
    const Linear &qkv_proj = b.self_attn.qkv_proj, &o_proj = b.self_attn.o_proj;
    const Linear &gate_up = b.mlp.gate_up_proj, &down = b.mlp.down_proj;
    k.rmsnorm_forward(rows_.x, norm_1.param(norm_1.weight), rows_.normed, rows_.rstd, norm_1.eps);
    linear_into(rows_.normed, qkv_proj.param(qkv_proj.weight), Tensor(), qkv_);
    k.rope_forward(qkv_, qkv_, H, Hkv, b.self_attn.rope_theta, pos_);  // q and k rotated in place
    cache_.store(static_cast<int64_t>(l), qkv_, 1, pos_, H * D, (H + Hkv) * D);
    cache_.attend(static_cast<int64_t>(l), qkv_, pos_ + 1, scale, rows_.heads);
    linear_into(rows_.heads, o_proj.param(o_proj.weight), Tensor(), rows_.delta);
    // h = x + attention, and post_attention_layernorm of it
    k.residual_rmsnorm_forward(rows_.x, rows_.delta, norm_2.param(norm_2.weight), rows_.h,
                               rows_.normed, rows_.rstd, norm_2.eps);
    linear_into(rows_.normed, gate_up.param(gate_up.weight), Tensor(), gate_up_);
    k.swiglu_forward(gate_up_, act_);
    linear_into(act_, down.param(down.weight), Tensor(), rows_.delta);
    k.binary(kernels::BinaryOp::add, rows_.h, rows_.delta, rows_.x);  // x = h + mlp
  }
  const RMSNorm& norm = model_.model.norm;
  k.rmsnorm_forward(rows_.x, norm.param(norm.weight), rows_.normed, rows_.rstd, norm.eps);
  linear_into(rows_.normed, model_.lm_head_weight(), Tensor(), rows_.logits);
  ++pos_;
  return rows_.read_logits();
}

std::vector<float> LlamaDecoder::logits_of_last(const Tensor& x) {
  const int64_t n = x.size(1);
  const Tensor last = n == 1 ? x : slice(x, 1, n - 1, n);
  return host_f32(model_.logits(model_.model.norm.forward(last)));
}

}  // namespace glass
