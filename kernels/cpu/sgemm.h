// glass's own f32 GEMM for the cpu device, and its bf16-operand form (kernels/cpu/sgemm.cpp
// explains how both work).
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/dtype.h"  // bf16

namespace glass::kernels::cpu {

// Zeros of a causal product that sgemm may skip (kernels/cpu/flash_attention.cpp). With d the
// `diagonal`, in C's and op(A)'s row numbering:
//   kLowerC: only the entries (i, j) of C with j <= i + d are wanted. A register tile entirely
//            above that line is not computed; a tile the line crosses is computed whole. What C
//            holds past the line is unspecified: a caller reads only the wanted entries.
//   kLowerA: op(A)'s entries (i, p) with p > i + d are zero: each tile's sum over k stops there.
//   kUpperA: op(A)'s entries (i, p) with p < i + d are zero: each tile's sum starts there.
// Skipping a term that is exactly zero changes nothing in the sum, so the bits are those of the
// full product wherever it is wanted (as long as op(B) is finite: 0 x inf would have been NaN).
struct Causal {
  enum Kind { kNone, kLowerC, kLowerA, kUpperA };
  Kind kind = kNone;
  int64_t diagonal = 0;

  // The register tile of C's rows [.., last_row] from column first_col: wholly above kLowerC's
  // line, so not computed.
  bool skips_tile(int64_t first_col, int64_t last_row) const {
    return kind == kLowerC && first_col > last_row + diagonal;
  }
  // The k range [begin, end) of slab [p0, p0 + kc), relative to the slab, that the register tile
  // of C's rows [first_row, last_row] must sum over: all of it, unless A has a band.
  struct KRange {
    int64_t begin, end;
  };
  KRange tile_k_range(int64_t first_row, int64_t last_row, int64_t p0, int64_t kc) const {
    int64_t begin = 0, end = kc;
    if (kind == kLowerA) end = std::clamp(last_row + diagonal + 1 - p0, int64_t{0}, kc);
    if (kind == kUpperA) begin = std::clamp(first_row + diagonal - p0, int64_t{0}, kc);
    return {begin, std::max(begin, end)};
  }
};

// What a product may add to C = alpha op(A) op(B) + beta C.
struct SgemmOptions {
  const float* bias = nullptr;  // + bias[j] on every row of C
  Causal causal = {};           // zeros the product may skip (above)
  // Out: the m sums over k of op(A)'s rows, a_row_sums[i] = sum_p op(A)[i][p] (the bias gradient
  // of y = x W^T + b when A = dy^T), taken in double as the rows of A are packed, so the GEMM
  // reads A once for both.
  float* a_row_sums = nullptr;
};

// C = alpha op(A) op(B) + beta C (+ what `options` adds), row-major: op(A) is m x k, op(B) k x n,
// C m x n, each with its row stride (lda, ldb, ldc). beta == 0 never reads C. A C of at most
// kGemvMaxRows rows without a causal band or row sums runs as matrix-vector products instead
// (kernels/cpu/gemv.h: B read once where it is stored, no packing). Inside a parallel loop
// (kernels/cpu/threads.h) it runs on the calling thread; outside, it splits C into shares the
// pool's threads claim when the product is big enough. Same inputs give the same bits whatever the
// thread count: every element of C (and every row sum) is summed over k in one fixed order.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
           const SgemmOptions& options = {});

// The depth of sgemm's k slabs (KC) is chosen once per process from the size of the L2 cache
// (kernels/cpu/sgemm.cpp). This overrides it for the process, for a test that crosses slab edges
// with small products or a benchmark that compares depths; 0 restores the machine's choice. The
// depth sets the order of C's sums, so it changes the last bits. Not while a product runs.
void set_sgemm_slab_depth(int64_t kc);

// Where sgemm_bf16 leaves its result when the caller wants it in bf16: the value the f32 C would
// hold, alpha op(A) op(B) + beta C, plus bias[j] (f32, or none), rounded once to nearest even into
// `rounded` (row stride ld) instead of C (C's f32 storage is then scratch). The fast path rounds
// it in the micro-kernel, from the registers, as each tile's last k slab ends: a product whose k
// fits one slab never touches its f32 C. With keep_f32, C gets the unrounded value too (for an
// epilogue that reads the f32 value from C). With gelu (a GELU GEMM's epilogue, `rounded` being
// GELU's aux = bf16(pre)), bf16(gelu(value)) goes there too (row stride gelu_ld), computed in f32
// from the registers by GELU's one definition (kernels/cpu/gelu.h): neither pre nor GELU's output
// is ever written in f32.
struct Bf16Store {
  bf16* rounded = nullptr;
  int64_t ld = 0;
  const float* bias = nullptr;
  bool keep_f32 = false;
  bf16* gelu = nullptr;
  int64_t gelu_ld = 0;
  // whether the store asks for anything beyond the plain f32 C
  bool active() const { return rounded != nullptr || bias != nullptr || gelu != nullptr; }
  // The same store for the block of C whose corner is (row, col) of this one's.
  Bf16Store at(int64_t row, int64_t col) const {
    Bf16Store s = *this;
    if (rounded) s.rounded += row * ld + col;
    if (bias) s.bias += col;
    if (gelu) s.gelu += row * gelu_ld + col;
    return s;
  }
};

// C = alpha op(A) op(B) + beta C with bf16 A and B and an f32 C (same layout and threading rules
// as sgemm): every product of two bf16 values is exact in f32, the products are summed in f32,
// and C stays f32 (the caller rounds it to bf16 once, after whatever epilogue it adds), unless
// `store` asks for the bf16 result (Bf16Store; with its bias, (alpha op(A) op(B) + beta C) + bias
// in that order, cuBLASLt's). options.a_row_sums as for sgemm (summed in double from the exact
// bf16 values); options.bias and options.causal are not taken (an error). On a CPU with
// AVX512-BF16 (vdpbf16ps) the micro-kernel multiplies bf16 pairs directly; elsewhere, or when
// set_bf16_gemm_fallback(true), A and B are widened to f32 (exactly) and sgemm runs: the first
// time that happens because the CPU lacks AVX512-BF16, one line on stderr says so. The two paths
// sum in different orders (and vdpbf16ps treats subnormal inputs as zero and flushes subnormal
// sums), so they agree to f32 rounding, not bit for bit; each alone gives the same bits whatever
// the thread count.
void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float beta, float* c,
                int64_t ldc, const SgemmOptions& options = {}, const Bf16Store& store = {});

// Whether this CPU executes AVX512-BF16 (cpuid leaf 7 subleaf 1, EAX bit 5), with AVX512BW (the
// 16-bit masked stores of the bf16 results; every CPU with AVX512-BF16 has it), and the OS saves
// the AVX-512 registers; checked once per process.
bool cpu_has_avx512_bf16();
// Forces sgemm_bf16 onto the f32 conversion path (true) or back to the fastest the CPU allows
// (false), for tests and benchmarks that compare the two. Process-wide; not while a product runs.
void set_bf16_gemm_fallback(bool forced);
// Whether sgemm_bf16 runs the vdpbf16ps micro-kernel now (the CPU has it and it is not forced off).
bool bf16_gemm_fast_path();

// The register tile and cache blocks sgemm uses, for reports and tests.
struct SgemmBlocking {
  int mr, nr;          // the micro-kernel's tile of C
  const char* passes;  // the parts of the tile that one k loop each holds in registers
  int kc, mc, nc;      // k slab, rows of A packed per block, columns of B packed per panel
  int vector_bits;     // the width the micro-kernel's vectors compile to in this build
};
SgemmBlocking sgemm_blocking();

}  // namespace glass::kernels::cpu
