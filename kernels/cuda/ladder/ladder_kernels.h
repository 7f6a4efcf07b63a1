// Host launchers of the kernel ladders (kernels/cuda/ladder/*.cu): the rungs that are not a
// production kernel. The registry (kernels/ladder.h) lists every rung, production ones included,
// and runs rung N through a device's LadderTable (ladder_emu.cpp for emu).
// Each launcher computes what its production counterpart computes; contracts in kernels/backend.h.
#pragma once

#include "kernels/cuda/cuda_kernels.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

// softmax_ladder.cu: y = softmax(x) over the last dimension, f32
void softmax_forward_naive(const Tensor& x, const Tensor& y);
void softmax_forward_coalesced(const Tensor& x, const Tensor& y);
void softmax_forward_float4(const Tensor& x, const Tensor& y);

// layernorm_ladder.cu: LayerNorm forward over the last dimension, f32
void layernorm_forward_naive(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps);
void layernorm_forward_coalesced(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                 double eps);
void layernorm_forward_float4(const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps);

// layernorm_ladder.cu, the RMSNorm pair: rung 0 (rung 1 is the production rmsnorm_forward), f32 or
// bf16 with f32 rstd
void rmsnorm_forward_naive(const Tensor& x, const Tensor& weight, const Tensor& y,
                           const Tensor& rstd, double eps);

// matmul_ladder.cu: the whole GemmArgs contract (transposes, leading dimensions, batches, alpha,
// beta, bias), so that training can run on any rung
void matmul_naive(const GemmArgs& g);
void matmul_smem_tiled(const GemmArgs& g);
void matmul_register_tiled(const GemmArgs& g);
// Rung 4, Tensor Cores: bf16 operands (f32 ones rounded to bf16 first), f32 accumulation; C of the
// operands' dtype
void matmul_tensor_core(const GemmArgs& g);
// Test only: rung 4 with its A fragments' 8-row halves swapped, a deliberately wrong layout whose
// result the ladder's comparison must reject (tests/ladder/test_matmul_rungs.cpp)
// (f32 operands, neither transposed).
void matmul_tensor_core_swapped_rows(const GemmArgs& g);

// attention_ladder.cu: causal attention forward on qkv [B, T, 3C] -> out [B, T, C], lse [B, H, T]
// (the flash_attention_forward contract), f32
void attention_forward_naive(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale);
void attention_forward_row_fused(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                 int64_t n_head, int64_t n_kv_head, double scale);
void attention_forward_tiled(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale);

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
