// The bf16 products of the cpu flash attention (kernels/cpu/flash_attention.cpp): C = op(A) op(B)
// (+ C) with bf16 A and B and an f32 C, on the calling thread, skipping what a causal band zeroes
// (sgemm.h's Causal) tile by tile, summed in one fixed order on every CPU
// (attention_gemm_bf16.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/dtype.h"
#include "kernels/cpu/sgemm.h"  // Causal

namespace glass::kernels::cpu {

// C = op(A) op(B), or C += op(A) op(B) with `accumulate`; op(A) m x k, op(B) k x n, row-major with
// row strides lda, ldb, ldc (A, B as stored; trans_a, trans_b as for sgemm). `causal` as for
// sgemm. Every element of C is summed from zero over its k range, k pairs (2q, 2q + 1) ascending,
// each pair's odd product added before its even one, every add rounded to f32 (vdpbf16ps's order;
// subnormal inputs read as zero, subnormal sums flushed to zero), then added to C. The bits are
// the same with and without AVX512-BF16 (set_bf16_gemm_fallback picks the path, as for
// sgemm_bf16).
void attention_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const bf16* a,
                         int64_t lda, const bf16* b, int64_t ldb, bool accumulate, float* c,
                         int64_t ldc, Causal causal = {});

// op(B) (k x n) packed once for several products that read its first k' <= k rows and n' <= n
// columns (a slice's K and V, for every query block): sgemm_bf16's NR-wide k-pair panels.
struct PackedBf16B {
  std::vector<uint32_t> words;
  int64_t k = 0, n = 0;
  void pack(const bf16* b, int64_t ldb, bool trans_b, int64_t k_rows, int64_t n_cols);
};
// attention_gemm_bf16 with op(B) packed: n <= b.n, k <= b.k (k even where it is less). The same
// bits as packing it there.
void attention_gemm_bf16(bool trans_a, int64_t m, int64_t n, int64_t k, const bf16* a, int64_t lda,
                         const PackedBf16B& b, bool accumulate, float* c, int64_t ldc,
                         Causal causal = {});

}  // namespace glass::kernels::cpu
