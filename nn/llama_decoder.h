// LlamaDecoder: a Llama's forward for generation with a KV cache, as GPTDecoder for GPT. The cache
// (nn/kv_cache.h) holds each block's keys (already rotated) and values for n_kv_head heads only,
// which is what grouped-query attention saves: n_head / n_kv_head times fewer bytes than
// multi-head attention.
//
//   x = embed_tokens(id)                                             [1, C]
//   per block: qkv = rope(qkv_proj(input_layernorm(x)), pos)        (q and k rotated at pos)
//              K[pos] = k, V[pos] = v                                (one row of [Hkv, T, D])
//              y = softmax(q K^T / sqrt(D)) V   with q's heads grouped [Hkv, H / Hkv, D]
//              x = x + o_proj(y);  x = x + mlp(post_attention_layernorm(x))
//   logits = norm(x) @ lm_head^T
//
// prefill() runs a prompt through the blocks' ordinary causal attention (the model's kernel) and
// writes its keys and values into the cache; step() is the kernel calls above into buffers
// allocated at the first prefill (a token allocates nothing). Builds no tape.
#pragma once

#include <vector>

#include "nn/kv_cache.h"
#include "nn/llama.h"

namespace glass {

class LlamaDecoder : public Decoder {
 public:
  explicit LlamaDecoder(const Llama& model) : model_(model) {}

  std::vector<float> prefill(const std::vector<int32_t>& ids) override;
  std::vector<float> step(int32_t id) override;

 private:
  std::vector<float> logits_of_last(const Tensor& x);  // x [1, n, C]
  void reserve(DType dtype, Device device);            // the cache and the step's buffers

  const Llama& model_;
  KVCache cache_;
  DecoderRows rows_;  // the step's rows every decoder has (nn/kv_cache.h), and Llama's own:
  // the rotated qkv [1, 1, W], gate_up and SwiGLU's output
  Tensor qkv_, gate_up_, act_;
};

}  // namespace glass
