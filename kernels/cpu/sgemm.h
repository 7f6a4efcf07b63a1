// glass's own f32 GEMM for the cpu device (kernels/cpu/sgemm.cpp explains how it works).
#pragma once

#include <cstdint>

namespace glass::kernels::cpu {

// C = alpha op(A) op(B) + beta C (+ bias[j] on every row, when bias is given), row-major: op(A)
// is m x k, op(B) k x n, C m x n, each with its row stride (lda, ldb, ldc). beta == 0 never reads
// C. Inside an OpenMP parallel region it runs on the calling thread; outside, it splits C over the
// OpenMP threads when the product is big enough. Same inputs give the same bits whatever the
// thread count: every element of C is summed over k in one fixed order.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           const float* bias = nullptr);

// The register tile and cache blocks sgemm uses, for reports and tests.
struct SgemmBlocking {
  int mr, nr;       // the micro-kernel's tile of C held in registers
  int kc, mc, nc;   // k slab, rows of A packed per block, columns of B packed per panel
  int vector_bits;  // the width the micro-kernel's vectors compile to in this build
};
SgemmBlocking sgemm_blocking();

}  // namespace glass::kernels::cpu
