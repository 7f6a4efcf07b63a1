// FLOPs of causal FlashAttention (the flash entries of kernels/kernel_list.inc), shared by
// kernels/cpu/flash_attention.cpp, kernels/cuda/flash_attention.cu and
// kernels/cuda/flash_attention_mma.cu (kernels/costs/launch_cost.h). Counted per causal score
// entry (i, j <= i) of every (batch, query head) slice: the work the math needs (the tiles the
// diagonal crosses compute a few entries more, so the rate shown errs low).
//
// The forward is one algorithm everywhere. The backward is not: cpu runs it in one pass per
// key/value slice (S again, dV, dP, dQ and dK, 2D each, with dQ summed in place), while emu and
// cuda split it in two launches so that no two blocks add to one gradient (no float atomics,
// deterministic): a query pass (S, dP, dQ) and a key pass (S, dP, dV, dK), each recomputing S and
// dP, which costs 4D + 4 FLOPs per entry more than one pass. Bytes are each device's own: cpu
// counts every operand once; the CUDA launchers count K and V (or Q and dO) again for every tile
// that loads them.
#pragma once

#include <cstdint>

namespace glass::kernels {

// The causal entries of `slices` T x T score matrices.
inline double causal_entries(int64_t slices, int64_t T) {
  return static_cast<double>(slices) * (static_cast<double>(T) * static_cast<double>(T + 1) / 2);
}

// Forward, per causal entry: S = Q K^T and P V (2D each), the softmax's max, subtract, exp, sum,
// rescale (5).
inline double flash_attention_forward_flops(int64_t slices, int64_t T, int64_t D) {
  return causal_entries(slices, T) * (4.0 * static_cast<double>(D) + 5);
}

// D_i = rowsum(dO o O), 2D per query row: in the cpu pass and in the CUDA query pass.
inline double flash_attention_row_delta_flops(int64_t slices, int64_t T, int64_t D) {
  return 2.0 * static_cast<double>(D) * static_cast<double>(slices * T);
}

// Backward in one pass (cpu), per causal entry: S, dV, dP, dQ, dK (2D each) and dS (4); and D_i.
inline double flash_attention_backward_flops(int64_t slices, int64_t T, int64_t D) {
  return causal_entries(slices, T) * (10.0 * static_cast<double>(D) + 4) +
         flash_attention_row_delta_flops(slices, T, D);
}

// The CUDA query pass, per causal entry: S, dP, dS K (2D each) and exp, subtract, multiply (4);
// and D_i.
inline double flash_attention_backward_query_flops(int64_t slices, int64_t T, int64_t D) {
  return causal_entries(slices, T) * (6.0 * static_cast<double>(D) + 4) +
         flash_attention_row_delta_flops(slices, T, D);
}

// The CUDA key pass, per causal entry: S, dP, P^T dO, dS^T Q (2D each) and 4.
inline double flash_attention_backward_key_flops(int64_t slices, int64_t T, int64_t D) {
  return causal_entries(slices, T) * (8.0 * static_cast<double>(D) + 4);
}

}  // namespace glass::kernels
