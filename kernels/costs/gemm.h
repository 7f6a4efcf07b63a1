// The cost of a GEMM (GemmArgs, kernels/backend.h), shared by kernels/cpu/gemm.cpp, the cuBLAS and
// cuBLASLt launchers of kernels/cuda (gemm.cu, gemm_lt.cu) and the matmul ladder's rungs
// (kernels/cuda/ladder/matmul_ladder.cu) (kernels/costs/launch_cost.h).
//
// FLOPs: 2mnk per matrix. What each device adds is its own: cuBLASLt's epilogues count one FLOP per
// element of C for the bias add or the reduction (gemm_lt.cu); cpu starts C from the bias and lets
// the GEMM's own adds accumulate onto it (no extra FLOP), and counts op(A)'s row sums when it takes
// them in the same launch (gemm_bgrad_a). Bytes are per element of each operand, in its dtype.
#pragma once

#include <cstdint>

#include "kernels/backend.h"

namespace glass::kernels {

inline double gemm_flops(const GemmArgs& g) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
         static_cast<double>(g.batch);
}

// The elements a GEMM moves: each distinct input matrix once (a batch stride of 0 reuses one
// matrix), C written (and read when beta != 0), the bias once.
struct GemmElements {
  double a = 0, b = 0, c = 0, bias = 0;
};
inline GemmElements gemm_elements(const GemmArgs& g) {
  const double batch = static_cast<double>(g.batch);
  return {static_cast<double>(g.m * g.k) * (g.stride_a == 0 ? 1 : batch),
          static_cast<double>(g.k * g.n) * (g.stride_b == 0 ? 1 : batch),
          static_cast<double>(g.m * g.n) * batch * (g.beta != 0 ? 2 : 1),
          g.bias.defined() ? static_cast<double>(g.n) : 0.0};
}

}  // namespace glass::kernels
