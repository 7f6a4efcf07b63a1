#include "nn/llama_decoder.h"

#include <cmath>

namespace glass {

namespace {

// Columns [begin, begin + heads D) of qkv [1, n, W] as heads [1, heads, n, D].
Tensor heads_of(const Tensor& qkv, int64_t begin, int64_t heads, int64_t D) {
  const int64_t n = qkv.size(1);
  const Tensor part = contiguous(slice(qkv, 2, begin, begin + heads * D));
  return contiguous(transpose(view(part, {1, n, heads, D}), 1, 2));
}

}  // namespace

Tensor LlamaDecoder::block(size_t layer, const Tensor& x) {
  const LlamaBlock& b = *model_.model.layers[layer];
  const GPTConfig& c = model_.config;
  const int64_t H = c.n_head, Hkv = c.kv_heads(), D = c.head_dim(), n = x.size(1);
  const Tensor qkv = b.self_attn.rotated_qkv(b.input_layernorm.forward(x), pos_);
  const Tensor k = heads_of(qkv, H * D, Hkv, D), v = heads_of(qkv, (H + Hkv) * D, Hkv, D);
  Tensor y;
  if (pos_ == 0) {
    // The prompt: the block's own causal attention on the rotated qkv, as in Llama::forward.
    y = causal_attention(qkv, H, Hkv, b.self_attn.attention);
    keys_[layer] = k;
    values_[layer] = v;
  } else {
    // One new position attends to every cached one (all are in its past). The query heads that
    // share a key/value head are grouped as rows: q [1, Hkv, H / Hkv, D] against K [1, Hkv, pos,
    // D].
    keys_[layer] = concat({keys_[layer], k}, 2);
    values_[layer] = concat({values_[layer], v}, 2);
    const Tensor q = view(contiguous(slice(qkv, 2, 0, H * D)), {1, Hkv, H / Hkv, D});
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const Tensor probs = softmax(matmul(q, transpose(keys_[layer], -2, -1)) * scale);
    y = view(matmul(probs, values_[layer]), {1, n, H * D});  // heads side by side
  }
  const Tensor h = x + b.self_attn.o_proj.forward(y);
  return h + b.mlp.forward(b.post_attention_layernorm.forward(h));
}

std::vector<float> LlamaDecoder::prefill(const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(ids.size());
  GLASS_CHECK(n >= 1 && n <= model_.config.block_size,
              "LlamaDecoder::prefill: {} tokens; 1..block_size={} fit", n,
              model_.config.block_size);
  const size_t L = model_.model.layers.size();
  keys_.assign(L, Tensor());
  values_.assign(L, Tensor());
  pos_ = 0;
  Tensor x = model_.model.embed_tokens.forward(from_vector(ids, {1, n}, model_.device()));
  for (size_t l = 0; l < L; ++l) x = block(l, x);
  pos_ = n;
  return logits_of_last(x);
}

std::vector<float> LlamaDecoder::step(int32_t id) {
  NoGradGuard no_grad;
  GLASS_CHECK(pos_ >= 1, "LlamaDecoder::step: prefill a prompt first");
  GLASS_CHECK(pos_ < model_.config.block_size,
              "LlamaDecoder::step: position {} is past block_size={}", pos_,
              model_.config.block_size);
  Tensor x = model_.model.embed_tokens.forward(from_vector<int32_t>({id}, {1, 1}, model_.device()));
  for (size_t l = 0; l < model_.model.layers.size(); ++l) x = block(l, x);
  ++pos_;
  return logits_of_last(x);
}

std::vector<float> LlamaDecoder::logits_of_last(const Tensor& x) {
  const int64_t n = x.size(1);
  const Tensor last = n == 1 ? x : slice(x, 1, n - 1, n);
  const Tensor logits = model_.logits(model_.model.norm.forward(last));
  return to_vector<float>(logits.dtype() == DType::f32 ? logits : cast(logits, DType::f32));
}

}  // namespace glass
