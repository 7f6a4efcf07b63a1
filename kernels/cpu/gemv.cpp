// The cpu GEMM's products with one to four rows (sgemv_rows): matrix-vector products that read
// the weights once, where they are stored.
//
// Why a path of its own: decoding one token multiplies one row x [1, k] by every weight matrix, 2
// FLOPs per weight read, so the product runs at the speed the weights stream from memory or cache
// (GPT-2 124M: 0.5 GB of f32 weights per token), never at the FMA units' speed. The blocked GEMM
// (sgemm.cpp) packs the whole of op(B) into panels before reading any of it: for m = 1 that is
// B read, written and read again, three times the bytes the product needs. Here B is read once,
// in its storage order:
//
//   op(B) = W^T (trans_b; W stored n x k, a Linear's weight [out, in]): C[i][j] = A_i . W_j, a dot
//     product along W's contiguous rows. Blocks of four rows of W, each row read whole in turn,
//     against the m rows of A, 16 k per vector into two sets of 16-lane accumulators (even and
//     odd blocks of k); each column's 16 lanes are added at the end by one fixed tree of shuffles
//     (fold4).
//   op(B) = B (stored k x n): C[i][j..j+64) = sum over p of A[i][p] B[p][j..j+64), p in order: four
//     vectors of C's row in registers while B's rows stream past.
//
// The tails (k not a multiple of 16, the last columns) go through the same vector code on
// zero-padded copies, so every element of C is summed in the same order wherever its column falls.
// A product whose B is large enough is split over the pool's threads (kernels/cpu/threads.h) by
// C's columns (each chunk reads only its share of B), so the bits do not depend on the thread
// count.
#include "kernels/cpu/gemv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/native_vector.h"
#include "kernels/cpu/threads.h"

namespace glass::kernels::cpu {

namespace {

using Vec = float __attribute__((vector_size(64)));  // 16 floats, as sgemm's
constexpr int64_t kLanes = 16;
constexpr int64_t kDotColumns = 4;                // columns of C per dot-product block
constexpr int64_t kAxpyColumns = 4 * kLanes;      // columns of C per streamed-row block
constexpr double kParallelWeights = 64.0 * 1024;  // op(B) elements (256 KB) worth two threads

// The totals of four 16-lane sums in lanes 0..3, by one fixed tree: halves, quarters, pairs, then
// neighbours. Each column's lanes meet in the same order whichever slot it takes.
[[gnu::always_inline]] inline Vec fold4(Vec a, Vec b, Vec c, Vec d) {
  // [a 0..7 | b 0..7] and [c 0..7 | d 0..7]: lane l + lane l + 8
  const Vec ab =
      __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
      __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const Vec cd =
      __builtin_shufflevector(c, d, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
      __builtin_shufflevector(c, d, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  // [a 0..3 | b 0..3 | c 0..3 | d 0..3]
  const Vec quarters =
      __builtin_shufflevector(ab, cd, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
      __builtin_shufflevector(ab, cd, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  // [a 0,1 | b 0,1 | c 0,1 | d 0,1 | (repeated)]
  const Vec pairs = __builtin_shufflevector(quarters, quarters, 0, 1, 4, 5, 8, 9, 12, 13, 0, 1, 4,
                                            5, 8, 9, 12, 13) +
                    __builtin_shufflevector(quarters, quarters, 2, 3, 6, 7, 10, 11, 14, 15, 2, 3, 6,
                                            7, 10, 11, 14, 15);
  return __builtin_shufflevector(pairs, pairs, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6) +
         __builtin_shufflevector(pairs, pairs, 1, 3, 5, 7, 1, 3, 5, 7, 1, 3, 5, 7, 1, 3, 5, 7);
}

// The product as the column kernels see it: op(A)'s m rows contiguous along k, op(B), C's
// epilogue.
struct Problem {
  const float* a_rows[kGemvMaxRows];
  const float* b;
  int64_t ldb, n, k;
  float alpha, beta;
  float* c;
  int64_t ldc;
  const float* bias;
};

// C[i][j] = alpha sum + bias[j] + beta C[i][j] (C not read when beta == 0).
void write(const Problem& p, int64_t i, int64_t j, float sum) {
  float* out = p.c + i * p.ldc + j;
  *out = p.alpha * sum + (p.bias ? p.bias[j] : 0.0f) + (p.beta != 0.0f ? p.beta * *out : 0.0f);
}

// 16 lanes as the loops hold them: kParts Native vectors (native_vector.h), one on AVX-512.
constexpr int kParts = kLanes / kNativeLanes;
struct Lanes {
  Native part[kParts];
};
[[gnu::always_inline]] inline Lanes load_lanes(const float* p) {
  Lanes v;
  for (int h = 0; h < kParts; ++h) v.part[h] = load_native(p + h * kNativeLanes);
  return v;
}
// The first `count` (< 16) floats at p, the other lanes zero.
Lanes load_lanes_part(const float* p, int64_t count) {
  alignas(64) float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, 0.0f);
  std::memcpy(lanes, p, static_cast<size_t>(count) * sizeof(float));
  return load_lanes(lanes);
}
Vec as_vec(const Lanes& v) {
  Vec out;
  std::memcpy(&out, v.part, sizeof out);
  return out;
}

// C's columns [j, j + live) (live <= 4) for a transposed B: the rows j.. of the stored W dotted
// with A's rows. A missing column repeats the last live row of W; its result is dropped.
//
// The four rows are read one after another, each whole: the block is one sequential stream,
// which a core reads faster than four rows side by side (the prefetcher follows one stream). A's
// rows are read four times, from L1. A row's 16-k blocks go alternately to two sets of sums (even
// and odd blocks), added when the row ends: two independent chains of FMAs, so the FMA's latency
// does not pace the stream. On the Zen 3 (bench/RESULTS.md, 2026-12-07, thirty-first session) the
// default model's products with 256-long rows took 10-20% less time, those with 1024-long rows
// (fewer, longer streams, which the prefetcher already followed) the same.
template <int M>
void dot_columns(const Problem& p, int64_t j, int64_t live) {
  Lanes acc[M][kDotColumns];
  for (int64_t col = 0; col < kDotColumns; ++col) {
    const float* w = p.b + (j + std::min(col, live - 1)) * p.ldb;
    Lanes even[M], odd[M];  // this row's sums, in registers while the row streams past
    for (int i = 0; i < M; ++i)
      for (int h = 0; h < kParts; ++h) even[i].part[h] = odd[i].part[h] = Native{};
    const auto update = [&](Lanes(&sums)[M], int64_t q, auto&& fetch) {
      const Lanes wv = fetch(w + q);
      for (int i = 0; i < M; ++i) {
        const Lanes x = fetch(p.a_rows[i] + q);
        for (int h = 0; h < kParts; ++h) sums[i].part[h] += x.part[h] * wv.part[h];
      }
    };
    const auto whole = [](const float* at) { return load_lanes(at); };
    int64_t q = 0;
    for (; q + 2 * kLanes <= p.k; q += 2 * kLanes) {
      update(even, q, whole);
      update(odd, q + kLanes, whole);
    }
    // At most one whole block and one partial block are left.
    if (q + kLanes <= p.k) {
      update(even, q, whole);
      q += kLanes;
    }
    if (q < p.k) {
      const int64_t rest = p.k - q;
      update(odd, q, [rest](const float* at) { return load_lanes_part(at, rest); });
    }
    for (int i = 0; i < M; ++i)
      for (int h = 0; h < kParts; ++h) acc[i][col].part[h] = even[i].part[h] + odd[i].part[h];
  }
  for (int i = 0; i < M; ++i) {
    const Vec sums =
        fold4(as_vec(acc[i][0]), as_vec(acc[i][1]), as_vec(acc[i][2]), as_vec(acc[i][3]));
    for (int64_t col = 0; col < live; ++col) write(p, i, j + col, sums[col]);
  }
}

// C's columns [j, j + live) (live <= 64) for a B stored k x n: B's rows stream through four
// vectors of each row of C, k in order.
template <int M>
void axpy_columns(const Problem& p, int64_t j, int64_t live) {
  constexpr int kVectors = kAxpyColumns / kLanes;
  Lanes acc[M][kVectors];
  for (int i = 0; i < M; ++i)
    for (int v = 0; v < kVectors; ++v)
      for (int h = 0; h < kParts; ++h) acc[i][v].part[h] = Native{};
  const auto update = [&](int64_t q, const Lanes(&bv)[kVectors]) {
    for (int i = 0; i < M; ++i) {
      const float x = p.a_rows[i][q];
      for (int v = 0; v < kVectors; ++v)
        for (int h = 0; h < kParts; ++h) acc[i][v].part[h] += x * bv[v].part[h];
    }
  };
  const float* row = p.b + j;
  if (live == kAxpyColumns) {
    for (int64_t q = 0; q < p.k; ++q, row += p.ldb) {
      Lanes bv[kVectors];
      for (int v = 0; v < kVectors; ++v) bv[v] = load_lanes(row + v * kLanes);
      update(q, bv);
    }
  } else {
    for (int64_t q = 0; q < p.k; ++q, row += p.ldb) {
      Lanes bv[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        const int64_t count = std::clamp<int64_t>(live - v * kLanes, 0, kLanes);
        bv[v] = count == kLanes ? load_lanes(row + v * kLanes)
                : count > 0     ? load_lanes_part(row + v * kLanes, count)
                                : Lanes{};
      }
      update(q, bv);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int v = 0; v < kVectors; ++v) {
      alignas(64) float sums[kLanes];
      std::memcpy(sums, acc[i][v].part, sizeof sums);
      for (int64_t col = v * kLanes; col < std::min<int64_t>(live, (v + 1) * kLanes); ++col)
        write(p, i, j + col, sums[col - v * kLanes]);
    }
}

// C's columns [begin, end) in blocks of the layout's width.
template <int M>
void columns(const Problem& p, bool trans_b, int64_t begin, int64_t end) {
  const int64_t width = trans_b ? kDotColumns : kAxpyColumns;
  for (int64_t j = begin; j < end; j += width) {
    const int64_t live = std::min(width, end - j);
    if (trans_b)
      dot_columns<M>(p, j, live);
    else
      axpy_columns<M>(p, j, live);
  }
}

void columns_for_rows(int64_t m, const Problem& p, bool trans_b, int64_t begin, int64_t end) {
  switch (m) {
    case 1:
      return columns<1>(p, trans_b, begin, end);
    case 2:
      return columns<2>(p, trans_b, begin, end);
    case 3:
      return columns<3>(p, trans_b, begin, end);
    default:
      return columns<4>(p, trans_b, begin, end);
  }
}

}  // namespace

void sgemv_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc, const float* bias) {
  if (m <= 0 || n <= 0) return;
  Problem p{{}, b, ldb, n, k, alpha, beta, c, ldc, bias};
  // A transposed (stored k x m) has its rows gathered once, contiguous along k.
  thread_local std::vector<float> gathered;
  if (trans_a) {
    gathered.resize(static_cast<size_t>(m * k));
    for (int64_t q = 0; q < k; ++q)
      for (int64_t i = 0; i < m; ++i) gathered[static_cast<size_t>(i * k + q)] = a[q * lda + i];
  }
  for (int64_t i = 0; i < m; ++i) p.a_rows[i] = trans_a ? gathered.data() + i * k : a + i * lda;
  const int threads = in_parallel() ? 1 : num_threads();
  if (threads == 1 || static_cast<double>(n) * static_cast<double>(k) < kParallelWeights)
    return columns_for_rows(m, p, trans_b, 0, n);
  // Shares of whole blocks (the last one takes the partial block), contiguous in C's columns,
  // claimed by the pool's threads (kernels/cpu/threads.h).
  const int64_t width = trans_b ? kDotColumns : kLanes;
  const int64_t units = (n + width - 1) / width;
  parallel_ranges(units, true, [&](int64_t first, int64_t last) {
    const int64_t begin = first * width, end = std::min(n, last * width);
    if (begin < end) columns_for_rows(m, p, trans_b, begin, end);
  });
}

}  // namespace glass::kernels::cpu
