// GPTDecoder: a GPT's forward for generation with a KV cache. Each block's keys and values of the
// positions seen so far are kept (nn/kv_cache.h), so that a new token costs one position's
// forward:
//
//   x = wte(id) + wpe(t)                                         [1, C]
//   per block: qkv = c_attn(ln_1(x)); K[t] = k, V[t] = v          (one row of the cache)
//              y = softmax(q K^T / sqrt(D)) V                     [1, H D] over t + 1 positions,
//              x = x + c_proj(y);  x = x + mlp(ln_2(x))           no mask: every cached key is past
//   logits = ln_f(x) @ wte^T                                     [table_rows]
//
// prefill() runs a whole prompt at positions 0..n-1 through the blocks' ordinary causal attention
// (the model's kernel) and writes its keys and values into the cache. step() is the kernel calls
// above into buffers allocated at the first prefill: a token allocates nothing, every weight
// matrix is read once (the GEMM's one-row path on cpu), and nothing records autograd history.
#pragma once

#include <vector>

#include "nn/gpt.h"
#include "nn/kv_cache.h"

namespace glass {

class GPTDecoder : public Decoder {
 public:
  explicit GPTDecoder(const GPT& model) : model_(model) {}

  std::vector<float> prefill(const std::vector<int32_t>& ids) override;
  std::vector<float> step(int32_t id) override;

 private:
  std::vector<float> logits_of_last(const Tensor& x);  // x [1, n, C]
  void reserve(DType dtype, Device device);            // the cache and the step's buffers

  const GPT& model_;
  KVCache cache_;
  DecoderRows rows_;  // the step's rows every decoder has (nn/kv_cache.h), and GPT's own:
  // LayerNorm's mean, qkv, the MLP's pre-activation and activation
  Tensor mean_, qkv_, pre_, fc_;
};

}  // namespace glass
