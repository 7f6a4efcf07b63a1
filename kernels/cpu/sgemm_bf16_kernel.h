// The parts of sgemm_bf16 that plug into sgemm's blocked loops (kernels/cpu/sgemm.cpp): the
// packing of bf16 operands into k-pair panels and the vdpbf16ps micro-kernel
// (kernels/cpu/sgemm_bf16.cpp), and the entry into the blocked loops (sgemm.cpp). Internal to the
// cpu GEMM.
#pragma once

#include <cstdint>

#include "engine/dtype.h"
#include "kernels/cpu/sgemm.h"  // Bf16Store

namespace glass::kernels::cpu {

// The register tile, sgemm's: the bf16 micro-kernel holds the same 8 x 32 tile of C in sixteen
// 16-lane f32 registers.
constexpr int kBf16MR = 8, kBf16NR = 32;

// Packed bf16 panels are made of k pairs: the 32-bit word (x[2q], x[2q + 1]) (low half, high half)
// of a row or column x of the operand, q = 0 .. ceil(kc / 2) - 1, the half past an odd kc zero.
inline int64_t k_pairs(int64_t kc) { return (kc + 1) / 2; }

// Whether a bf16 operand (data, row stride ld) whose lines run along k in storage (`along_k`: A
// not transposed, B transposed) already holds each k pair of the slab [p0, p0 + kc) as such a word
// where it is stored: the slab starts at an even k and has an even depth, the row stride is even
// and the data is 4-byte aligned. Its panels are then made by moving words (the f32 packing), or
// the micro-kernel reads its rows in place (an A, in whole tiles).
inline bool k_pairs_are_words(const bf16* data, int64_t ld, bool along_k, int64_t p0, int64_t kc) {
  return along_k && kc % 2 == 0 && p0 % 2 == 0 && ld % 2 == 0 &&
         reinterpret_cast<uintptr_t>(data) % alignof(uint32_t) == 0;
}

// op(A)[i0 : i0+rows, p0 : p0+kc] into MR-tall panels, each [k pair][MR] words (a panel is
// MR * k_pairs(kc) words), the rows past `rows` zero. data/ld/trans: A as stored. With row_sums
// (a transposed A only), row r's kc values are added to row_sums[r] in double, k ascending.
void pack_a_bf16_pairs(const bf16* data, int64_t ld, bool trans, int64_t i0, int64_t rows,
                       int64_t p0, int64_t kc, uint32_t* out, double* row_sums = nullptr);
// op(B)[p0 : p0+kc, j0 : j0+cols] into NR-wide panels, each [k pair][NR] words, the columns past
// `cols` zero.
void pack_b_bf16_pairs(const bf16* data, int64_t ld, bool trans, int64_t p0, int64_t kc, int64_t j0,
                       int64_t cols, uint32_t* out);

// The MR x NR tile of C at c: c = alpha * sum over k pairs of a_pair b_pair + beta c (beta == 0
// does not read c), for its first rows x cols; with `store` (its pointers at the tile's corner),
// the result goes there instead (Bf16Store). b: one packed B panel from the tile's first k pair.
// a: row r's k pair q is the word a[r * a_row_step + q * a_pair_step], all MR rows readable: a
// packed A panel (steps 1 and MR, its missing rows zero), or a row-major A whose pairs are 32-bit
// words where it is stored (steps ld / 2 and 1). Needs AVX512-BF16 (the caller checks).
void micro_kernel_bf16(int64_t pairs, const uint32_t* a, int64_t a_row_step, int64_t a_pair_step,
                       const uint32_t* b, float alpha, float beta, float* c, int64_t ldc,
                       int64_t rows, int64_t cols, const Bf16Store* store = nullptr);

// The store (Bf16Store) applied to an f32 C that holds alpha op(A) op(B) + beta C (m x n, row
// stride ldc): the bias added, the rounded result and GELU written, C left with the unrounded value
// where the store keeps it (or computes GELU from it). The fast path's store, for the paths that
// compute C in f32 first (the f32 conversion path, k == 0, the few-row GEMV).
void store_from_f32(float* c, int64_t ldc, int64_t m, int64_t n, const Bf16Store& store);

// sgemm_bf16's fast path: sgemm's blocked loops and threads with the packing and micro-kernel
// above. No causal band; a_row_sums as for sgemm. With store.rounded, the last k slab of every
// tile writes bf16(alpha acc + beta C + bias) there (Bf16Store, pointers at C's corner), and C
// (f32) only carries the sums between slabs; without it, store.bias must be null.
void sgemm_bf16_blocked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                        const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float beta,
                        float* c, int64_t ldc, float* a_row_sums, const Bf16Store& store = {});

}  // namespace glass::kernels::cpu
