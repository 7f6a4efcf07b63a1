// The independent reference of the FlashAttention tests: the probs-based cpu kernels
// (kernels/cpu/attention.cpp, the full T x T matrix through OpenBLAS GEMMs) on q, k, v split out of
// qkv [B, T, 3C], and the cpu flash entry's lse.
#pragma once

#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::testing {

struct AttentionReference {
  Tensor out;   // [B, T, C]
  Tensor dqkv;  // [B, T, 3C]
  Tensor lse;   // [B, H, T]
};

inline AttentionReference attention_reference(const Tensor& qkv, const Tensor& dout, int64_t H) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto to_heads = [&](const Tensor& t) {
    return contiguous(transpose(view(t, {B, T, H, D}), 1, 2));
  };
  auto from_heads = [&](const Tensor& t) { return reshape(transpose(t, 1, 2), {B, T, C}); };
  const std::vector<Tensor> parts = split(qkv, C, 2);
  const Tensor q = to_heads(parts[0]), k = to_heads(parts[1]), v = to_heads(parts[2]);
  const Tensor out = empty_like(q), probs = Tensor::empty({B, H, T, T});
  kernels::cpu::attention_forward(q, k, v, out, probs, scale);
  const Tensor dq = empty_like(q), dk = empty_like(q), dv = empty_like(q);
  kernels::cpu::attention_backward(q, k, v, probs, to_heads(dout), dq, dk, dv, scale);
  const Tensor out_flash = Tensor::empty({B, T, C}), lse = Tensor::empty({B, H, T});
  kernels::cpu::flash_attention_forward(qkv, out_flash, lse, H, H, scale);
  return {from_heads(out), concat({from_heads(dq), from_heads(dk), from_heads(dv)}, 2), lse};
}

}  // namespace glass::testing
