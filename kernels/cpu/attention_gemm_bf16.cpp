// attention_gemm_bf16: the bf16 products of the cpu flash attention (S = Q K^T, O = P V, dP =
// dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q), on one thread, with their causal band.
//
// A slice's products are small (at most 64 query rows x T keys x head dim D), so op(B) is packed
// whole into the k-pair panels of sgemm_bf16 (sgemm_bf16_kernel.h: the 32-bit word (x[2q],
// x[2q + 1]) per row or column and k pair q), op(A) too unless its pairs can be read where it is
// stored (a_as_tiles), and every 8 x 32 register tile sums its whole k range in one pass, with no
// k slabs: per element of C,
//
//   acc = 0;  for q = q_begin .. q_end - 1:  acc = (acc + a[2q+1] b[2q+1]) + a[2q] b[2q]
//   C = acc  (or C + acc)
//
// which is vdpbf16ps's arithmetic (sgemm_bf16.cpp): each add rounds the exact product plus the
// sum to nearest even once (an f32 FMA; the product of two bf16 values is exact in f32 unless it
// falls under f32's normal range, where the instruction still keeps it exact), subnormal inputs
// read as zero, and a subnormal result is flushed to a zero of its sign. (Measured against this
// CPU's vdpbf16ps, an AMD EPYC's, on 5 million sums of tiny and subnormal values: the same bits.)
// The causal band (sgemm.h's Causal) decides, per tile, whether it is computed at all (kLowerC) and
// its k range (kLowerA: up to the tile's last row's diagonal; kUpperA: from its first row's),
// widened to whole k pairs: the extra entries are zeros of A, which add nothing.
//
// Fast path (AVX512-BF16): sgemm_bf16's micro-kernel. Fallback (another CPU, or
// set_bf16_gemm_fallback(true)): the same packed panels and tiles through a scalar model of the
// instruction above, the bf16 values widened to f32 (exactly), so both paths give the same bits
// (tests/cuda_kernels/test_cpu_flash_attention_bf16.cpp checks it on this CPU's vdpbf16ps).
#include "kernels/cpu/attention_gemm_bf16.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/sgemm_bf16_kernel.h"

namespace glass::kernels::cpu {

namespace {

// x, or a zero of its sign where x is subnormal (the instruction's DAZ on its inputs and FTZ on
// its results); written as a compare and a select, so that the loops below vectorise.
inline float flushed(float x) {
  return std::fabs(x) < std::numeric_limits<float>::min() ? std::copysign(0.0f, x) : x;
}
// The bf16 in half `h` (0: low) of a packed word, as f32, read as the instruction reads it.
inline float half_value(uint32_t word, int h) {
  return flushed(std::bit_cast<float>(h == 0 ? word << 16 : word & 0xffff0000u));
}

// micro_kernel_bf16's result with alpha 1 and beta 0 or 1: the model of the fallback (header),
// the whole 8 x 32 tile at once, a k pair at a time, each pair's odd product then its even one,
// across the 32 columns (one vector loop per row). Its stores follow the micro-kernel's: a whole
// tile with beta 0 stores acc itself, a partial one acc + 0 (so a -0 becomes +0 there, as it does
// in the micro-kernel's bounce buffer).
void micro_kernel_bf16_model(int64_t pairs, const uint32_t* a, const uint32_t* b, float beta,
                             float* c, int64_t ldc, int64_t rows, int64_t cols) {
  float acc[kBf16MR][kBf16NR] = {};
  for (int64_t q = 0; q < pairs; ++q, a += kBf16MR, b += kBf16NR) {
    float b_odd[kBf16NR], b_even[kBf16NR];
    for (int j = 0; j < kBf16NR; ++j) {
      b_odd[j] = half_value(b[j], 1);
      b_even[j] = half_value(b[j], 0);
    }
    for (int r = 0; r < kBf16MR; ++r) {
      const float a_odd = half_value(a[r], 1), a_even = half_value(a[r], 0);
      for (int j = 0; j < kBf16NR; ++j) {
        acc[r][j] = flushed(std::fma(a_odd, b_odd[j], acc[r][j]));
        acc[r][j] = flushed(std::fma(a_even, b_even[j], acc[r][j]));
      }
    }
  }
  const bool whole = rows == kBf16MR && cols == kBf16NR;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float& out = c[r * ldc + j];
      out = beta != 0.0f ? acc[r][j] + out : whole ? acc[r][j] : acc[r][j] + 0.0f;
    }
}

// Where the micro-kernel reads op(A): the tile of rows i0 .. i0 + 7 from k pair q starts at
// at(i0, q), and its row r's pair q + t is the word r * row_step + t * pair_step from there.
struct ATiles {
  const uint32_t* words;
  int64_t row_step, pair_step, tile_step;
  const uint32_t* at(int64_t i0, int64_t q) const {
    return words + i0 / kBf16MR * tile_step + q * pair_step;
  }
};

// op(A) as the micro-kernel reads it. Where A's k pairs are words where it is stored
// (k_pairs_are_words) and every tile is whole, in place, as sgemm_bf16's blocked loops read such
// an A: packing it only copied Q, P, dO and dS into 8-row panels, which the micro-kernel reads
// from L1 or L2 either way (the same values, so the same bits). Else packed into this thread's
// buffer (the fallback's model reads only packed panels).
ATiles a_as_tiles(bool trans_a, int64_t m, int64_t k, const bf16* a, int64_t lda, bool fast) {
  const bool in_place = fast && m % kBf16MR == 0 && k_pairs_are_words(a, lda, !trans_a, 0, k);
  if (in_place) return {reinterpret_cast<const uint32_t*>(a), lda / 2, 1, kBf16MR * (lda / 2)};
  thread_local std::vector<uint32_t> a_words;
  const int64_t a_panel = kBf16MR * k_pairs(k);
  a_words.resize(static_cast<size_t>((m + kBf16MR - 1) / kBf16MR * a_panel));
  pack_a_bf16_pairs(a, lda, trans_a, 0, m, 0, k, a_words.data());
  return {a_words.data(), 1, kBf16MR, a_panel};
}

}  // namespace

void PackedBf16B::pack(const bf16* b, int64_t ldb, bool trans_b, int64_t k_rows, int64_t n_cols) {
  k = k_rows;
  n = n_cols;
  words.resize(static_cast<size_t>((n + kBf16NR - 1) / kBf16NR * kBf16NR * k_pairs(k)));
  if (n > 0) pack_b_bf16_pairs(b, ldb, trans_b, 0, k, 0, n, words.data());
}

void attention_gemm_bf16(bool trans_a, int64_t m, int64_t n, int64_t k, const bf16* a, int64_t lda,
                         const PackedBf16B& b, bool accumulate, float* c, int64_t ldc,
                         Causal causal) {
  // (an odd k short of b.k would pair its last row of A's zero pad with a row of B, not B's pad)
  if (n > b.n || k > b.k || (k % 2 != 0 && k != b.k))
    throw std::logic_error(
        "attention_gemm_bf16: a product wider or deeper than its packed B, or of an odd k short "
        "of it");
  if (m <= 0 || n <= 0) return;
  const int64_t b_panel = kBf16NR * k_pairs(b.k);
  const bool fast = bf16_gemm_fast_path();
  const ATiles a_tiles = a_as_tiles(trans_a, m, k, a, lda, fast);
  const float beta = accumulate ? 1.0f : 0.0f;
  for (int64_t j0 = 0; j0 < n; j0 += kBf16NR)
    for (int64_t i0 = 0; i0 < m; i0 += kBf16MR) {
      const int64_t rows = std::min<int64_t>(kBf16MR, m - i0),
                    cols = std::min<int64_t>(kBf16NR, n - j0);
      const int64_t last_row = i0 + rows - 1;
      if (causal.skips_tile(j0, last_row)) continue;
      // the tile's k range, widened to whole k pairs (the extra entries are zeros of A)
      const Causal::KRange range = causal.tile_k_range(i0, last_row, 0, k);
      const int64_t q0 = range.begin / 2, tile_pairs = k_pairs(range.end) - q0;
      const uint32_t* a_tile = a_tiles.at(i0, q0);
      const uint32_t* b_tile = b.words.data() + j0 / kBf16NR * b_panel + q0 * kBf16NR;
      float* c_tile = c + i0 * ldc + j0;
      if (fast)
        micro_kernel_bf16(tile_pairs, a_tile, a_tiles.row_step, a_tiles.pair_step, b_tile, 1.0f,
                          beta, c_tile, ldc, rows, cols);
      else
        micro_kernel_bf16_model(tile_pairs, a_tile, b_tile, beta, c_tile, ldc, rows, cols);
    }
}

void attention_gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const bf16* a,
                         int64_t lda, const bf16* b, int64_t ldb, bool accumulate, float* c,
                         int64_t ldc, Causal causal) {
  thread_local PackedBf16B packed;
  packed.pack(b, ldb, trans_b, k, n);
  attention_gemm_bf16(trans_a, m, n, k, a, lda, packed, accumulate, c, ldc, causal);
}

}  // namespace glass::kernels::cpu
