// sgemm_bf16: C = alpha op(A) op(B) + beta C with bf16 A and B and an f32 C, for the cpu
// device's bf16 GEMMs (kernels/cpu/gemm_bf16.cpp rounds C to bf16 after the epilogue).
//
// Fast path, on a CPU with AVX512-BF16: sgemm's blocked loops and threads (kernels/cpu/sgemm.cpp)
// with a second micro-kernel built on vdpbf16ps (_mm512_dpbf16_ps). Its math, per f32 lane i of
// the accumulator, with x and y holding 32 bf16 values each:
//
//   acc[i] = (acc[i] + x[2i+1] y[2i+1]) + x[2i] y[2i]
//
// A product of two bf16 values (8-bit significands) has at most 16 significant bits, so it is
// exact in f32; each of the two adds rounds to nearest even, whatever MXCSR says, and the
// instruction treats subnormal inputs as zero and flushes subnormal results to zero (bf16 GEMMs
// on a GPU's tensor cores sum in f32 too, in their own order). So one instruction is two k steps
// of a rank-1 update, and the register tile is sgemm's own (8 x 32 of C in sixteen 16-lane f32
// registers): per k pair, two 64-byte loads of B, eight 32-bit broadcasts of A, sixteen
// vdpbf16ps, twice the k of an f32 FMA step for the same instruction count, and half the bytes.
// For that the packing puts k pairs side by side: a B panel holds, for k pair q and column j, the
// 32-bit word (B[2q][j], B[2q+1][j]); an A panel, for row r, (A[r][2q], A[r][2q+1]), broadcast to
// every lane (a row-major A already holds those words where it is stored, at an even row stride:
// the micro-kernel then reads them there, kernels/cpu/sgemm.cpp). An odd k pads its last pair with
// a zero (0 x y adds +0, and changes no sum).
//
// Fallback, on any other CPU (or when set_bf16_gemm_fallback asks): A and B widened to f32
// (exact) and sgemm. It says once per process, on stderr, that the CPU lacks AVX512-BF16.
//
// The micro-kernel is compiled with a target attribute, so that the rest of the build keeps the
// ISA it was configured for; it only runs where cpuid says the CPU has AVX512-BF16.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/cpu.h"  // for_each_row
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/round_bf16.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/sgemm_bf16_kernel.h"

namespace glass::kernels::cpu {

namespace {

std::atomic<bool> fallback_forced{false};

uint32_t pair(bf16 low, bf16 high) { return low.bits | (uint32_t{high.bits} << 16); }

// op(X) as stored (rows x cols, row stride ld) widened to a compact f32 copy in `out`: exact,
// since a bf16 is the top half of an f32. `out` is a per-thread buffer kept between calls: a fresh
// allocation per call cost a page fault per 4 KB, which made a 512^3 product 5x slower than sgemm
// on a busy machine. Up to 64 MB each is kept.
const float* widen(const bf16* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& out) {
  if (out.size() < static_cast<size_t>(rows * cols)) out.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = x[i * ld + j].to_float();
  return out.data();
}

// The conversion path: A and B widened to f32, then sgemm (its blocking, threads and f32 sums).
void sgemm_bf16_by_widening(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const bf16* a, int64_t lda, const bf16* b, int64_t ldb,
                            float beta, float* c, int64_t ldc, const SgemmOptions& options) {
  thread_local std::vector<float> a_buffer, b_buffer;
  const int64_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  const float* wide_a = widen(a, trans_a ? k : m, a_cols, lda, a_buffer);
  const float* wide_b = widen(b, trans_b ? n : k, b_cols, ldb, b_buffer);
  sgemm(trans_a, trans_b, m, n, k, alpha, wide_a, a_cols, wide_b, b_cols, beta, c, ldc, options);
  // a very large operand (GPT-2's tied LM head: 154 MB as f32) is not kept for the next call
  constexpr size_t kKeptFloats = size_t{16} << 20;
  for (std::vector<float>* buffer : {&a_buffer, &b_buffer})
    if (buffer->size() > kKeptFloats) std::vector<float>().swap(*buffer);
}

// Eight k pairs from two stored rows: dst[l] = pair(even[l], odd[l]), l < 8 (on x86-64, SSE2's
// 16-bit interleave: the pair's low half is the even row's value).
inline void pair_eight(const bf16* even, const bf16* odd, uint32_t* dst) {
#if defined(__x86_64__)
  const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even)),
                o = _mm_loadu_si128(reinterpret_cast<const __m128i*>(odd));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi16(e, o));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 4), _mm_unpackhi_epi16(e, o));
#else
  for (int l = 0; l < 8; ++l) dst[l] = pair(even[l], odd[l]);
#endif
}

#if defined(__x86_64__)
bool cpu_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// The first 16 x `blocks` k pairs of eight lines into out[q * out_step + l] (l < 8), where line l's
// pair q is the 32-bit word at data + l ld + 2q: an 8 x 16 transpose of 32-bit words per block of
// 16 pairs, in three rounds of shuffles, each round pairing what the last one paired. One word at a
// time, this transpose took 4% of a bf16 training step (the forward GEMMs' W^T) and a fifth of the
// bf16 flash attention's time outside its products (Q, P, dO and dS, K^T and V^T).
__attribute__((target("avx512f"))) void transpose_eight_lines(const bf16* data, int64_t ld,
                                                              int64_t blocks, uint32_t* out,
                                                              int64_t out_step) {
  // 128-bit lanes [a.0, b.0, a.1, b.1] and [a.2, b.2, a.3, b.3] of two vectors a and b
  const __m512i first_lanes = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0),
                last_lanes = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  // (the shuffles' zero-masked forms with every lane kept: GCC 12's unmasked ones start from an
  // undefined vector, which it then reports as maybe uninitialised, as in round_to_bf16_bits)
  const __mmask16 words = 0xffff;
  const __mmask8 quads = 0xff, half_of_quads = 0xf;
  for (int64_t block = 0; block < blocks; ++block) {
    __m512i line[8], two[8], four[8];
    for (int l = 0; l < 8; ++l) line[l] = _mm512_loadu_si512(data + l * ld + 32 * block);
    // 1. lines 2p and 2p + 1 word by word: in 128-bit lane L, pairs 4L, 4L + 1 (lo) and
    // 4L + 2, 4L + 3 (hi)
    for (int p = 0; p < 4; ++p) {
      two[2 * p] = _mm512_maskz_unpacklo_epi32(words, line[2 * p], line[2 * p + 1]);
      two[2 * p + 1] = _mm512_maskz_unpackhi_epi32(words, line[2 * p], line[2 * p + 1]);
    }
    // 2. four lines' pair 4L + i in lane L: four[i] for lines 0-3, four[4 + i] for lines 4-7
    for (int half = 0; half < 2; ++half) {
      const __m512i* t = two + 4 * half;
      four[4 * half] = _mm512_maskz_unpacklo_epi64(quads, t[0], t[2]);
      four[4 * half + 1] = _mm512_maskz_unpackhi_epi64(quads, t[0], t[2]);
      four[4 * half + 2] = _mm512_maskz_unpacklo_epi64(quads, t[1], t[3]);
      four[4 * half + 3] = _mm512_maskz_unpackhi_epi64(quads, t[1], t[3]);
    }
    // 3. all eight lines' pair 4L + i: lane L of four[i] then of four[4 + i]; a 256-bit store each
    for (int i = 0; i < 4; ++i) {
      const __m512i low = _mm512_permutex2var_epi64(four[i], first_lanes, four[4 + i]),
                    high = _mm512_permutex2var_epi64(four[i], last_lanes, four[4 + i]);
      uint32_t* pair_i = out + (16 * block + i) * out_step;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pair_i),
                          _mm512_maskz_extracti64x4_epi64(half_of_quads, low, 0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pair_i + 4 * out_step),
                          _mm512_maskz_extracti64x4_epi64(half_of_quads, low, 1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pair_i + 8 * out_step),
                          _mm512_maskz_extracti64x4_epi64(half_of_quads, high, 0));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pair_i + 12 * out_step),
                          _mm512_maskz_extracti64x4_epi64(half_of_quads, high, 1));
    }
  }
}
#endif

// Pair-packs `width` lines of op(X), each a run along k of kc values from p0: line l, k pair q
// goes to out[q * kWidth + l]; lines past `width` and the half past an odd kc are zero.
// `along_k`: the line's values are contiguous in storage (line l starts at data + l * ld); else
// consecutive lines are contiguous and the k steps are ld apart. data points at line 0, k = p0.
template <int kWidth>
void pack_pairs(const bf16* data, int64_t ld, bool along_k, int64_t width, int64_t kc,
                uint32_t* out) {
  const int64_t pairs = k_pairs(kc), whole = kc / 2;
  if (width < kWidth)
    for (int64_t q = 0; q < pairs; ++q)
      std::fill(out + q * kWidth + width, out + (q + 1) * kWidth, 0u);
  const bf16 zero{};
  if (along_k) {
    // eight lines and 16 pairs at a time by shuffles where the CPU has AVX-512, the rest a word
    // at a time
    int64_t shuffled_lines = 0, shuffled_pairs = 0;
#if defined(__x86_64__)
    if (cpu_has_avx512f()) {
      shuffled_lines = width / 8 * 8;
      shuffled_pairs = whole / 16 * 16;
      for (int64_t l = 0; l < shuffled_lines && shuffled_pairs > 0; l += 8)
        transpose_eight_lines(data + l * ld, ld, shuffled_pairs / 16, out + l, kWidth);
    }
#endif
    for (int64_t l = 0; l < width; ++l) {
      const bf16* line = data + l * ld;
      for (int64_t q = l < shuffled_lines ? shuffled_pairs : 0; q < whole; ++q)
        out[q * kWidth + l] = pair(line[2 * q], line[2 * q + 1]);
      if (whole < pairs) out[whole * kWidth + l] = pair(line[2 * whole], zero);
    }
    return;
  }
  for (int64_t q = 0; q < pairs; ++q) {
    const bf16* even = data + 2 * q * ld;
    const bf16* odd = 2 * q + 1 < kc ? even + ld : nullptr;
    uint32_t* dst = out + q * kWidth;
    if (odd)
      for (int64_t l = 0; l < width; ++l) dst[l] = pair(even[l], odd[l]);
    else
      for (int64_t l = 0; l < width; ++l) dst[l] = pair(even[l], zero);
  }
}

// The rows are read kPrefetchPairs pairs ahead of their use: a block of A's columns is a short run
// (192 bytes of a 96-row block) in each of the slab's rows, ld apart, and without the hint the
// packing waited on every row's load (6% of a bf16 training step's CPU time).
constexpr int64_t kPrefetchPairs = 4;

// The same for all `width` lines at once where consecutive lines are contiguous and the k steps
// are ld apart (A transposed, B not): each pair of stored rows is read once, in full, and dealt
// out to the panels in turn (panel p: lines p kWidth ..., at out + p * k_pairs(kc) * kWidth).
// Walking one panel down the whole slab instead read 16 or 64 bytes per row at a stride of ld,
// every row falling into the same few L1 sets when ld is a multiple of 2 KB.
// With sums, each line's kc values are added to sums[l] (double) as they are read, k ascending:
// the row sums of a transposed A, in sum_rows_of_a's order (kernels/cpu/sgemm.cpp).
template <int kWidth>
void pack_pairs_across(const bf16* data, int64_t ld, int64_t width, int64_t kc, uint32_t* out,
                       double* sums = nullptr) {
  static_assert(kWidth % 8 == 0, "whole lines are paired eight at a time");
  const int64_t pairs = k_pairs(kc), panel_words = pairs * kWidth;
  for (int64_t q = 0; q < pairs; ++q) {
    const bf16* even = data + 2 * q * ld;
    const bf16* odd = 2 * q + 1 < kc ? even + ld : nullptr;
    if (sums != nullptr)
      for (const bf16* row : {even, odd})
        if (row != nullptr)
#pragma omp simd
          for (int64_t l = 0; l < width; ++l) sums[l] += row[l].to_float();
    if (2 * (q + kPrefetchPairs) + 1 < kc)
      for (const bf16* ahead :
           {even + 2 * kPrefetchPairs * ld, even + (2 * kPrefetchPairs + 1) * ld})
        for (int64_t l = 0; l < width; l += 32) __builtin_prefetch(ahead + l);
    for (int64_t l0 = 0; l0 < width; l0 += kWidth) {
      uint32_t* dst = out + l0 / kWidth * panel_words + q * kWidth;
      const int64_t live = std::min<int64_t>(kWidth, width - l0);
      if (live == kWidth && odd) {
        for (int l = 0; l < kWidth; l += 8) pair_eight(even + l0 + l, odd + l0 + l, dst + l);
        continue;
      }
      for (int64_t l = 0; l < live; ++l) dst[l] = pair(even[l0 + l], odd ? odd[l0 + l] : bf16{});
      std::fill(dst + live, dst + kWidth, 0u);
    }
  }
}

}  // namespace

void pack_a_bf16_pairs(const bf16* data, int64_t ld, bool trans, int64_t i0, int64_t rows,
                       int64_t p0, int64_t kc, uint32_t* out, double* row_sums) {
  // row i of op(A) runs along k in storage unless A is transposed
  if (trans) return pack_pairs_across<kBf16MR>(data + p0 * ld + i0, ld, rows, kc, out, row_sums);
  if (row_sums != nullptr)
    throw std::logic_error(
        "pack_a_bf16_pairs: row sums are taken while packing a transposed A only");
  const int64_t panel_words = k_pairs(kc) * kBf16MR;
  for (int64_t panel = 0; panel < rows; panel += kBf16MR, out += panel_words) {
    const int64_t i = i0 + panel, live = std::min<int64_t>(kBf16MR, rows - panel);
    pack_pairs<kBf16MR>(trans ? data + p0 * ld + i : data + i * ld + p0, ld, !trans, live, kc, out);
  }
}

void pack_b_bf16_pairs(const bf16* data, int64_t ld, bool trans, int64_t p0, int64_t kc, int64_t j0,
                       int64_t cols, uint32_t* out) {
  // column j of op(B) runs along k in storage when B is transposed
  if (!trans) return pack_pairs_across<kBf16NR>(data + p0 * ld + j0, ld, cols, kc, out);
  const int64_t panel_words = k_pairs(kc) * kBf16NR;
  for (int64_t panel = 0; panel < cols; panel += kBf16NR, out += panel_words) {
    const int64_t j = j0 + panel, live = std::min<int64_t>(kBf16NR, cols - panel);
    pack_pairs<kBf16NR>(trans ? data + j * ld + p0 : data + p0 * ld + j, ld, trans, live, kc, out);
  }
}

#if defined(__x86_64__)
namespace {

// The tile's last k slab through a Bf16Store: C = alpha acc + beta C (+ bias), kept in f32 or not,
// rounded to bf16, and GELU of it rounded to bf16, as the store asks; a partial tile through masks.
// Out of line: inside the micro-kernel, its live values cost the k loop registers (GCC then moved
// accumulators around and loaded B twice per k pair, 2-9% slower attention products).
__attribute__((target(GLASS_BF16_ROUND_TARGET), noinline)) void store_tile(
    const __m512 (&acc)[kBf16MR][2], float alpha, float beta, float* c, int64_t ldc, int64_t rows,
    int64_t cols, const Bf16Store& store) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  // the store's fields in locals: read through the reference, they were reloaded after every
  // store to C (which might alias them), in every row
  bf16* const rounded = store.rounded;
  const float* const bias = store.bias;
  const int64_t rounded_ld = store.ld;
  const bool write_f32 = rounded == nullptr || store.keep_f32;
  bf16* const gelu = store.gelu;
  const int64_t gelu_ld = store.gelu_ld;
  // a row's live columns: all 32 in a whole tile (as 16-bit lanes, for the bf16 stores)
  __mmask16 lanes[2];
  for (int half = 0; half < 2; ++half) {
    const int64_t live = std::clamp<int64_t>(cols - 16 * half, 0, 16);
    lanes[half] = static_cast<__mmask16>(live == 16 ? 0xffffu : (1u << live) - 1);
  }
  const __mmask32 bf16_lanes = lanes[0] | (static_cast<__mmask32>(lanes[1]) << 16);
  const __m512 bias_half[2] = {
      bias != nullptr ? _mm512_maskz_loadu_ps(lanes[0], bias) : _mm512_setzero_ps(),
      bias != nullptr ? _mm512_maskz_loadu_ps(lanes[1], bias + 16) : _mm512_setzero_ps()};
  for (int64_t r = 0; r < rows; ++r) {
    __m512 v[2];
    for (int half = 0; half < 2; ++half) {
      float* row = c + r * ldc + 16 * half;
      v[half] = _mm512_mul_ps(va, acc[r][half]);
      if (beta != 0.0f)
        v[half] =
            _mm512_add_ps(v[half], _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(lanes[half], row)));
      if (bias != nullptr) v[half] = _mm512_add_ps(v[half], bias_half[half]);
      if (write_f32) _mm512_mask_storeu_ps(row, lanes[half], v[half]);
    }
    if (rounded != nullptr)
      _mm512_mask_storeu_epi16(rounded + r * rounded_ld, bf16_lanes,
                               round_pair_to_bf16(v[0], v[1]));
    if (gelu != nullptr) {  // GELU of the f32 value, by its one definition (gelu.h), rounded once
      alignas(64) float activated[kBf16NR];
      _mm512_store_ps(activated, v[0]);
      _mm512_store_ps(activated + 16, v[1]);
#pragma omp simd
      for (int j = 0; j < kBf16NR; ++j) activated[j] = gelu_forward_of(activated[j]);
      _mm512_mask_storeu_epi16(
          gelu + r * gelu_ld, bf16_lanes,
          round_pair_to_bf16(_mm512_load_ps(activated), _mm512_load_ps(activated + 16)));
    }
  }
}

}  // namespace

// One k pair of the tile: for each row r, acc[r][0] += a[r] . b0 and acc[r][1] += a[r] . b1, with
// a[r] (row r's pair of A) broadcast to every lane from memory ({1to16}). Sixteen vdpbf16ps in one
// statement of inline assembly on named accumulators: clang 16 crashes when it optimises the
// __m512bh type of _mm512_dpbf16_ps (any -O level above 0; GCC does not), and an array of
// accumulators updated by one asm statement per row is kept in memory by GCC, a store and a load
// around every instruction (3x slower than the f32 kernel).
#define GLASS_DPBF16_ROW(r, acc0, acc1)   \
  "vdpbf16ps %[a" #r "], %[b0], %[" #acc0 \
  "]\n\t"                                 \
  "vdpbf16ps %[a" #r "], %[b1], %[" #acc1 "]\n\t"

__attribute__((target(GLASS_BF16_ROUND_TARGET))) void micro_kernel_bf16(
    int64_t pairs, const uint32_t* a, int64_t a_row_step, int64_t a_pair_step, const uint32_t* b,
    float alpha, float beta, float* c, int64_t ldc, int64_t rows, int64_t cols,
    const Bf16Store* store) {
  // 1. the tile in registers, one rank-2 update per k pair: B's pair row (32 columns, two
  // vectors) against each row's pair of A broadcast to every lane
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
         c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00,
         c70 = c00, c71 = c00;
  if (beta != 0.0f)  // a tile that adds onto C asks for C's lines now (as sgemm's micro-kernel)
    for (int r = 0; r < kBf16MR; ++r) {
      __builtin_prefetch(c + r * ldc, 1);
      __builtin_prefetch(c + r * ldc + 16, 1);
    }
  static_assert(kBf16MR == 8 && kBf16NR == 32, "the assembly below holds an 8 x 32 tile");
  const int64_t s = a_row_step;
  for (int64_t q = 0; q < pairs; ++q, a += a_pair_step, b += kBf16NR) {
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 16);
    // two statements of four rows each: an asm statement takes at most 30 operands, and an
    // accumulator read and written counts twice
    const __m512i a0 = _mm512_set1_epi32(static_cast<int>(a[0])),
                  a1 = _mm512_set1_epi32(static_cast<int>(a[s])),
                  a2 = _mm512_set1_epi32(static_cast<int>(a[2 * s])),
                  a3 = _mm512_set1_epi32(static_cast<int>(a[3 * s]));
    asm(GLASS_DPBF16_ROW(0, c00, c01) GLASS_DPBF16_ROW(1, c10, c11) GLASS_DPBF16_ROW(2, c20, c21)
            GLASS_DPBF16_ROW(3, c30, c31)
        : [c00] "+v"(c00), [c01] "+v"(c01), [c10] "+v"(c10), [c11] "+v"(c11), [c20] "+v"(c20),
          [c21] "+v"(c21), [c30] "+v"(c30), [c31] "+v"(c31)
        : [a0] "v"(a0), [a1] "v"(a1), [a2] "v"(a2), [a3] "v"(a3), [b0] "v"(b0), [b1] "v"(b1));
    const __m512i a4 = _mm512_set1_epi32(static_cast<int>(a[4 * s])),
                  a5 = _mm512_set1_epi32(static_cast<int>(a[5 * s])),
                  a6 = _mm512_set1_epi32(static_cast<int>(a[6 * s])),
                  a7 = _mm512_set1_epi32(static_cast<int>(a[7 * s]));
    asm(GLASS_DPBF16_ROW(4, c40, c41) GLASS_DPBF16_ROW(5, c50, c51) GLASS_DPBF16_ROW(6, c60, c61)
            GLASS_DPBF16_ROW(7, c70, c71)
        : [c40] "+v"(c40), [c41] "+v"(c41), [c50] "+v"(c50), [c51] "+v"(c51), [c60] "+v"(c60),
          [c61] "+v"(c61), [c70] "+v"(c70), [c71] "+v"(c71)
        : [a4] "v"(a4), [a5] "v"(a5), [a6] "v"(a6), [a7] "v"(a7), [b0] "v"(b0), [b1] "v"(b1));
  }
  const __m512 acc[kBf16MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                                  {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  // 2. C = alpha acc + beta C, written once; a partial tile goes through masks (bf16) or a bounce
  // buffer (f32)
  if (store != nullptr)  // the last k slab, with a bias or a bf16 destination
    return store_tile(acc, alpha, beta, c, ldc, rows, cols, *store);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  if (rows == kBf16MR && cols == kBf16NR) {
    for (int r = 0; r < kBf16MR; ++r) {
      float* row = c + r * ldc;
      __m512 out0 = _mm512_mul_ps(va, acc[r][0]), out1 = _mm512_mul_ps(va, acc[r][1]);
      if (beta != 0.0f) {
        out0 = _mm512_add_ps(out0, _mm512_mul_ps(vb, _mm512_loadu_ps(row)));
        out1 = _mm512_add_ps(out1, _mm512_mul_ps(vb, _mm512_loadu_ps(row + 16)));
      }
      _mm512_storeu_ps(row, out0);
      _mm512_storeu_ps(row + 16, out1);
    }
    return;
  }
  alignas(64) float edge[kBf16MR][kBf16NR];
  for (int r = 0; r < kBf16MR; ++r) {
    _mm512_store_ps(edge[r], _mm512_mul_ps(va, acc[r][0]));
    _mm512_store_ps(edge[r] + 16, _mm512_mul_ps(va, acc[r][1]));
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      c[r * ldc + j] = edge[r][j] + (beta != 0.0f ? beta * c[r * ldc + j] : 0.0f);
}
#undef GLASS_DPBF16_ROW
#else
void micro_kernel_bf16(int64_t, const uint32_t*, int64_t, int64_t, const uint32_t*, float, float,
                       float*, int64_t, int64_t, int64_t, const Bf16Store*) {
  throw std::logic_error("micro_kernel_bf16: AVX512-BF16 exists only on x86-64");
}
#endif

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  // GCC's cpuid probe (libgcc reads leaf 7 subleaf 1 for AVX512-BF16 and checks that XCR0
  // enables the ZMM state).
  static const bool has = cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

void set_bf16_gemm_fallback(bool forced) {
  fallback_forced.store(forced, std::memory_order_relaxed);
}

bool bf16_gemm_fast_path() {
  return cpu_has_avx512_bf16() && !fallback_forced.load(std::memory_order_relaxed);
}

void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float beta, float* c,
                int64_t ldc, const SgemmOptions& options, const Bf16Store& store) {
  if (options.bias != nullptr || options.causal.kind != Causal::kNone)
    throw std::invalid_argument(
        "sgemm_bf16: options.bias or a causal band is not taken (a bias goes in the Bf16Store)");
  if (m <= 0 || n <= 0) return;
  if (bf16_gemm_fast_path()) {
    // A C of a few rows (decoding a token) is matrix-vector work: B read once, unpacked (gemv.cpp)
    if (m <= kGemvMaxRows && options.a_row_sums == nullptr) {
      sgemv_rows_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return store_from_f32(c, ldc, m, n, store);
    }
    return sgemm_bf16_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                              options.a_row_sums, store);
  }
  if (!cpu_has_avx512_bf16()) {
    static std::once_flag said;
    std::call_once(said, [] {
      std::fprintf(stderr,
                   "glass: this CPU lacks AVX512-BF16 (vdpbf16ps): bf16 GEMMs on cpu convert "
                   "their operands to f32 and run the f32 GEMM\n");
    });
  }
  sgemm_bf16_by_widening(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, options);
  store_from_f32(c, ldc, m, n, store);
}

void store_from_f32(float* c, int64_t ldc, int64_t m, int64_t n, const Bf16Store& store) {
  if (!store.active()) return;
  // the fast path's store (store_tile): (alpha AB + beta C) + bias, rounded once or not, and GELU
  // of the f32 value (GELU's one definition, gelu.h) rounded once. One loop per step, each free of
  // branches, so that GCC vectorises it (with the three tests inside, it did not: the GELU GEMM
  // ran at 0.56-0.63 of the plain one's rate on AVX2, bench/RESULTS.md 2026-12-07). C's f32 row
  // holds the biased value even where the caller keeps only the bf16 result: it is then scratch.
  for_each_row(m, m * n, [&](int64_t i) {
    float* row = c + i * ldc;
    if (store.bias)
      for (int64_t j = 0; j < n; ++j) row[j] += store.bias[j];
    if (store.rounded) round_row_to_bf16(row, store.rounded + i * store.ld, n);
    if (store.gelu) {
      bf16* gelu = store.gelu + i * store.gelu_ld;
      for (int64_t j = 0; j < n; ++j) gelu[j] = bf16::from_float(gelu_forward_of(row[j]));
    }
  });
}

}  // namespace glass::kernels::cpu
