// The layers a Llama is made of, each a Module with Hugging Face's Llama names, except that the
// projections that read the same input are fused into one matrix (one GEMM instead of three, or
// two): self_attn.qkv_proj is q_proj, k_proj and v_proj stacked, mlp.gate_up_proj is gate_proj and
// up_proj stacked. nn/gpt_weights.h converts to and from Hugging Face's separate matrices.
//
//   block(x) = h + mlp(post_attention_layernorm(h)),  h = x + self_attn(input_layernorm(x))
//   self_attn(x) = o_proj(attention(rope(qkv_proj(x))))      grouped-query, causal
//   mlp(x) = down_proj(silu(gate) * up),  [gate, up] = gate_up_proj(x)
//
// No biases anywhere. Every residual add runs fused with the RMSNorm that reads its sum
// (residual_rms_norm), as GPT's blocks fuse theirs with LayerNorm.
#pragma once

#include "nn/gpt_config.h"
#include "nn/layers.h"
#include "nn/recompute.h"

namespace glass {

// y = x * rsqrt(mean(x^2) + eps) * weight, weight [dim] (ones when fresh).
class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps);
  Tensor forward(const Tensor& x) const {
    ModulePathScope in(path());
    return rms_norm(x, param(weight), eps);
  }
  // The residual add before this RMSNorm, fused with it: {x + delta, forward(x + delta)}.
  ResidualNorm forward(const Tensor& x, const Tensor& delta) const {
    ModulePathScope in(path());
    return residual_rms_norm(x, delta, param(weight), eps);
  }
  void reset();  // weight = 1

  Tensor weight;
  double eps;
};

// Grouped-query causal self-attention with rotary positions on x [B, T, C]:
//   qkv_proj [(H + 2 Hkv) D, C] -> qkv [B, T, (H + 2 Hkv) D] -> RoPE on its q and k heads
//   -> causal_attention(qkv, H, Hkv) [B, T, H D] -> o_proj [C, H D]
class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const GPTConfig& config);
  Tensor forward(const Tensor& x) const;

  // qkv_proj(x) with RoPE applied at positions start_pos.. (the KV-cache decoder's first step).
  Tensor rotated_qkv(const Tensor& x, int64_t start_pos) const;

  int64_t n_head, n_kv_head;
  double rope_theta;
  AttentionKernel attention = AttentionKernel::automatic;
  Linear qkv_proj, o_proj;
};

// SwiGLU: down_proj(swiglu(gate_up_proj(x))), gate_up_proj [2F, C], down_proj [C, F].
class LlamaMLP : public Module {
 public:
  LlamaMLP(int64_t n_embd, int64_t ffn_hidden);
  Tensor forward(const Tensor& x) const {
    ModulePathScope in(path());
    const Tensor gate_up = gate_up_proj.forward(x);
    if (!recompute_swiglu) return down_proj.forward(swiglu(gate_up));
    // --recompute gelu (SwiGLU's activation is GELU's analogue): keeps gate_up, re-runs
    // down_proj(swiglu(gate_up)) in backward (the down projection's GEMM once more).
    return checkpointed([this](const Tensor& gu) { return down_proj.forward(swiglu(gu)); },
                        gate_up);
  }

  Linear gate_up_proj, down_proj;
  bool recompute_swiglu = false;
};

class LlamaBlock : public Module {
 public:
  explicit LlamaBlock(const GPTConfig& config);
  // x: the residual stream, x_normed = input_layernorm(x) (computed by the caller, fused with the
  // add before). Returns the block's output stream and next_norm of it.
  ResidualNorm forward(const Tensor& x, const Tensor& x_normed, const RMSNorm& next_norm) const;

  RMSNorm input_layernorm;
  LlamaAttention self_attn;
  RMSNorm post_attention_layernorm;
  LlamaMLP mlp;
  bool recompute_mlp = false;  // --recompute mlp: the MLP keeps its input, re-runs in backward
};

}  // namespace glass
