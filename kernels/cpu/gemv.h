// The few-row products of the cpu GEMM (kernels/cpu/gemv.cpp explains how and why): sgemm hands
// a C of at most kGemvMaxRows rows to sgemv_rows instead of packing.
#pragma once

#include <cstdint>

namespace glass::kernels::cpu {

// The most rows of C sgemm computes as matrix-vector products: decoding one token is m = 1 (a
// llama's grouped query heads against one key/value head make m = n_head / n_kv_head).
constexpr int64_t kGemvMaxRows = 4;

// C = alpha op(A) op(B) + beta C (+ bias[j] on every row) for 1 <= m <= kGemvMaxRows, row-major,
// the operands as sgemm takes them (sgemm.h). beta == 0 never reads C. Outside an OpenMP parallel
// region a product whose B is large enough is split over the threads by C's columns; every
// element of C is summed over k in one fixed order, so the bits do not depend on the threads.
void sgemv_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc, const float* bias);

}  // namespace glass::kernels::cpu
