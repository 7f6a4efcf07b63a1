// GPTDecoder: a GPT's forward for generation with a KV cache. Each block's keys and values of the
// positions seen so far are kept, so that a new token costs one position's forward:
//
//   x = wte(id) + wpe(t)                                         [1, 1, C]
//   per block: qkv = c_attn(ln_1(x)); K = [K, k], V = [V, v]     (the cache grows by one row)
//              y = softmax(q K^T / sqrt(D)) V                     [1, H, 1, D] over t+1 positions,
//              x = x + c_proj(y);  x = x + mlp(ln_2(x))           no mask: every cached key is past
//   logits = ln_f(x) @ wte^T                                     [table_rows]
//
// prefill() runs a whole prompt at positions 0..n-1 through the blocks' ordinary causal attention
// (the model's kernel) and keeps its keys and values. The cache grows by concatenation (a copy of
// t rows per layer and token: as much memory traffic as the attention itself reads).
// Needs no gradients: builds no tape (NoGradGuard inside).
#pragma once

#include <vector>

#include "nn/gpt.h"

namespace glass {

class GPTDecoder : public Decoder {
 public:
  explicit GPTDecoder(const GPT& model) : model_(model) {}

  std::vector<float> prefill(const std::vector<int32_t>& ids) override;
  std::vector<float> step(int32_t id) override;

 private:
  std::vector<float> logits_of_last(const Tensor& x);  // x [1, n, C]

  const GPT& model_;
  std::vector<Tensor> keys_, values_;  // per block: [1, H, pos, D]
};

}  // namespace glass
