// LlamaDecoder: a Llama's forward for generation with a KV cache, as GPTDecoder for GPT. The cache
// holds each block's keys (already rotated) and values for n_kv_head heads only, which is what
// grouped-query attention saves: n_head / n_kv_head times fewer bytes than multi-head attention.
//
//   x = embed_tokens(id)                                             [1, 1, C]
//   per block: qkv = rope(qkv_proj(input_layernorm(x)), pos)        (q and k rotated at pos)
//              K = [K, k], V = [V, v]                                [1, Hkv, pos + 1, D]
//              y = softmax(q K^T / sqrt(D)) V   with q's heads grouped [1, Hkv, H / Hkv, D]
//              x = x + o_proj(y);  x = x + mlp(post_attention_layernorm(x))
//   logits = norm(x) @ lm_head^T
//
// prefill() runs a prompt through the blocks' ordinary causal attention (the model's kernel) and
// keeps its keys and values. Builds no tape (NoGradGuard inside).
#pragma once

#include <vector>

#include "nn/llama.h"

namespace glass {

class LlamaDecoder : public Decoder {
 public:
  explicit LlamaDecoder(const Llama& model) : model_(model) {}

  std::vector<float> prefill(const std::vector<int32_t>& ids) override;
  std::vector<float> step(int32_t id) override;

 private:
  // One block on x [1, n, C] at positions pos_..pos_+n-1, its keys and values joining the cache.
  Tensor block(size_t layer, const Tensor& x);
  std::vector<float> logits_of_last(const Tensor& x);  // x [1, n, C]

  const Llama& model_;
  std::vector<Tensor> keys_, values_;  // per block: [1, Hkv, pos, D]
};

}  // namespace glass
