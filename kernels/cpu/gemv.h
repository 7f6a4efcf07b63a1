// The few-row products of the cpu GEMM (kernels/cpu/gemv.cpp explains how and why): sgemm hands
// a C of at most kGemvMaxRows rows to sgemv_rows instead of packing.
#pragma once

#include <cstdint>

#include "engine/dtype.h"

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

// The same with bf16 A and B and an f32 C, without a bias (sgemm_bf16 adds it in its store): the
// products on vdpbf16ps, each pair of k's products added to an f32 sum in the instruction's
// order (kernels/cpu/sgemm_bf16.cpp), half the bytes of f32 per weight read. Needs AVX512-BF16
// (the caller checks: bf16_gemm_fast_path). The same bits whatever the thread count.
void sgemv_rows_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float beta, float* c,
                     int64_t ldc);

}  // namespace glass::kernels::cpu
