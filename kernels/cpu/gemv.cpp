// The cpu GEMM's products with one to four rows (sgemv_rows, and sgemv_rows_bf16 for bf16
// operands): matrix-vector products that read the weights once, where they are stored.
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
// count. bf16 operands take the same two layouts on vdpbf16ps (below, "bf16 operands").
#include "kernels/cpu/gemv.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/native_vector.h"
#include "kernels/cpu/round_bf16.h"  // GLASS_BF16_ROUND_TARGET
#include "kernels/cpu/threads.h"

namespace glass::kernels::cpu {

namespace {

using Vec = float __attribute__((vector_size(64)));  // 16 floats, as sgemm's
constexpr int64_t kLanes = 16;
constexpr int64_t kDotColumns = 4;            // columns of C per dot-product block
constexpr int64_t kAxpyColumns = 4 * kLanes;  // columns of C per streamed-row block
// The bytes of op(B) from which two threads split a product. A thread streams the default model's
// weights from L3 at ~60 GB/s, so a 1 MB matrix takes ~17 us on one; splitting a smaller one
// cost more in waking and waiting than it saved: decoding the default model at 2 threads read
// 5,110-5,250 tokens/s (f32) and 7,590-7,770 (bf16) with a 256 KB threshold, 5,520-5,780 and
// 8,500-8,680 with 1 MB, and f32 fell to 3,600-5,040 with 2 MB (the Zen 5 of bench/RESULTS.md,
// 2026-12-08).
constexpr double kParallelWeightBytes = 1024.0 * 1024;

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

// The product as the column kernels see it: op(A)'s m rows contiguous along k, op(B) (T: f32, or
// bf16 for sgemv_rows_bf16), C's epilogue (f32).
template <class T>
struct ProblemOf {
  const T* a_rows[kGemvMaxRows];
  const T* b;
  int64_t ldb, n, k;
  float alpha, beta;
  float* c;
  int64_t ldc;
  const float* bias;
};
using Problem = ProblemOf<float>;

// C[i][j] = alpha sum + bias[j] + beta C[i][j] (C not read when beta == 0).
template <class T>
void write(const ProblemOf<T>& p, int64_t i, int64_t j, float sum) {
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

#if defined(__x86_64__)
// --- bf16 operands (sgemv_rows_bf16): the same two layouts on vdpbf16ps ---
//
// One vdpbf16ps takes 32 bf16 values of k where an f32 FMA takes 16, in k pairs: per f32 lane l,
// acc[l] = (acc[l] + x[2l+1] y[2l+1]) + x[2l] y[2l], each add rounded to f32 (the arithmetic of
// sgemm_bf16.cpp's micro-kernel). For W^T, a row of W and a row of A hold their pairs side by side
// where they are stored: each 32-value block of k is one instruction per row of W (lane l gets
// pairs l, l + 16, ... of the row, then fold4, as for f32). For a B stored k x n, the rows 2q
// and 2q + 1 of B are interleaved into pairs by one 16-bit unpack per 32 columns and multiplied
// by row i's pair q of A broadcast to every lane, q in order. Half the bytes of f32 per weight:
// where the weights stream from cache or memory, up to twice the f32 rate. The functions carry
// the AVX512-BF16 target themselves (the build may be for AVX2), and so hold no lambdas, which
// would not inherit it.
constexpr int64_t kPairValues = 2 * kLanes;  // bf16 values of k per vdpbf16ps

// c0..c3 += x . v0..v3, pair by pair: one asm statement for the four instructions, on named
// accumulators (the instruction in inline assembly: sgemm_bf16.cpp says why).
__attribute__((target(GLASS_BF16_ROUND_TARGET), always_inline)) inline void dot_four(
    Vec& c0, Vec& c1, Vec& c2, Vec& c3, __m512i x, __m512i v0, __m512i v1, __m512i v2, __m512i v3) {
  asm("vdpbf16ps %[v0], %[x], %[c0]\n\t"
      "vdpbf16ps %[v1], %[x], %[c1]\n\t"
      "vdpbf16ps %[v2], %[x], %[c2]\n\t"
      "vdpbf16ps %[v3], %[x], %[c3]"
      : [c0] "+v"(c0), [c1] "+v"(c1), [c2] "+v"(c2), [c3] "+v"(c3)
      : [x] "v"(x), [v0] "v"(v0), [v1] "v"(v1), [v2] "v"(v2), [v3] "v"(v3));
}

// C's columns [j, j + live) (live <= 4) for a transposed B: the four rows of W side by side, each
// 32-value block of k one instruction per row of W, one chain of sums per column, k in order; A's
// rows one at a time (a second row reads the block's W from L1). (A bf16 row of the default
// model's weights is 512 bytes: read one after another, as the f32 kernel reads its rows, with the
// row of A reloaded for each, decoding ran 7-9% slower: bench/RESULTS.md, 2026-12-08.)
template <int M>
__attribute__((target(GLASS_BF16_ROUND_TARGET))) void dot_columns(const ProblemOf<bf16>& p,
                                                                  int64_t j, int64_t live) {
  const bf16 *w0 = p.b + j * p.ldb, *w1 = p.b + (j + std::min<int64_t>(1, live - 1)) * p.ldb,
             *w2 = p.b + (j + std::min<int64_t>(2, live - 1)) * p.ldb,
             *w3 = p.b + (j + std::min<int64_t>(3, live - 1)) * p.ldb;
  for (int i = 0; i < M; ++i) {
    const bf16* x = p.a_rows[i];
    // the four sums in named registers (an array of accumulators, one asm statement each, was
    // kept in memory: a store and a load around each)
    Vec c0{}, c1{}, c2{}, c3{};
    int64_t q = 0;
    for (; q + kPairValues <= p.k; q += kPairValues)
      dot_four(c0, c1, c2, c3, _mm512_loadu_si512(x + q), _mm512_loadu_si512(w0 + q),
               _mm512_loadu_si512(w1 + q), _mm512_loadu_si512(w2 + q), _mm512_loadu_si512(w3 + q));
    if (q < p.k) {  // the last block's loads masked to the k left (a zero pair adds +0)
      const auto left = static_cast<__mmask32>((uint64_t{1} << (p.k - q)) - 1);
      dot_four(c0, c1, c2, c3, _mm512_maskz_loadu_epi16(left, x + q),
               _mm512_maskz_loadu_epi16(left, w0 + q), _mm512_maskz_loadu_epi16(left, w1 + q),
               _mm512_maskz_loadu_epi16(left, w2 + q), _mm512_maskz_loadu_epi16(left, w3 + q));
    }
    const Vec sums = fold4(c0, c1, c2, c3);
    for (int64_t col = 0; col < live; ++col) write(p, i, j + col, sums[col]);
  }
}

// Row i's k pair q of A as the word (A[i][2q], A[i][2q + 1]), the half past an odd k zero.
inline uint32_t a_pair(const bf16* row, int64_t q, int64_t k) {
  const uint32_t odd = 2 * q + 1 < k ? row[2 * q + 1].bits : 0;
  return row[2 * q].bits | odd << 16;
}

// C's columns [j, j + live) (live <= 64) for a B stored k x n, in two halves of 32: per k pair,
// each half's two rows of B unpacked into pair words (the low unpack holds columns 0-3, 8-11,
// 16-19, 24-27 of the half; the high one the other four of each eight), against A's pair word;
// A's rows one at a time, each with its four sums in registers (dot_four).
template <int M>
__attribute__((target(GLASS_BF16_ROUND_TARGET))) void axpy_columns(const ProblemOf<bf16>& p,
                                                                   int64_t j, int64_t live) {
  __mmask32 live_columns[2];
  for (int half = 0; half < 2; ++half) {
    const int64_t count = std::clamp<int64_t>(live - half * kPairValues, 0, kPairValues);
    live_columns[half] = static_cast<__mmask32>((uint64_t{1} << count) - 1);
  }
  const __m512i zero = _mm512_setzero_si512();
  for (int i = 0; i < M; ++i) {
    Vec c0{}, c1{}, c2{}, c3{};  // low and high of the first half, then of the second
    for (int64_t q = 0; 2 * q < p.k; ++q) {
      const bf16* even = p.b + 2 * q * p.ldb + j;
      const bf16* odd = 2 * q + 1 < p.k ? even + p.ldb : nullptr;
      const __m512i e0 = _mm512_maskz_loadu_epi16(live_columns[0], even),
                    e1 = _mm512_maskz_loadu_epi16(live_columns[1], even + kPairValues),
                    o0 = odd ? _mm512_maskz_loadu_epi16(live_columns[0], odd) : zero,
                    o1 = odd ? _mm512_maskz_loadu_epi16(live_columns[1], odd + kPairValues) : zero;
      dot_four(c0, c1, c2, c3, _mm512_set1_epi32(static_cast<int>(a_pair(p.a_rows[i], q, p.k))),
               _mm512_unpacklo_epi16(e0, o0), _mm512_unpackhi_epi16(e0, o0),
               _mm512_unpacklo_epi16(e1, o1), _mm512_unpackhi_epi16(e1, o1));
    }
    // lane l of sum v (half v / 2, the high unpack when v is odd) is the half's column
    // 8 (l / 4) + 4 (v % 2) + l % 4
    const Vec c[4] = {c0, c1, c2, c3};
    for (int v = 0; v < 4; ++v)
      for (int64_t l = 0; l < kLanes; ++l) {
        const int64_t col = (v / 2) * kPairValues + 8 * (l / 4) + 4 * (v % 2) + l % 4;
        if (col < live) write(p, i, j + col, c[v][l]);
      }
  }
}
#endif

// C's columns [begin, end) in blocks of the layout's width.
template <int M, class T>
void columns(const ProblemOf<T>& p, bool trans_b, int64_t begin, int64_t end) {
  const int64_t width = trans_b ? kDotColumns : kAxpyColumns;
  for (int64_t j = begin; j < end; j += width) {
    const int64_t live = std::min(width, end - j);
    if (trans_b)
      dot_columns<M>(p, j, live);
    else
      axpy_columns<M>(p, j, live);
  }
}

template <class T>
void columns_for_rows(int64_t m, const ProblemOf<T>& p, bool trans_b, int64_t begin, int64_t end) {
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

// Either type's product: A's rows gathered where A is transposed, then C's columns, split over
// the threads when B is large enough.
template <class T>
void gemv_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
               int64_t lda, const T* b, int64_t ldb, float beta, float* c, int64_t ldc,
               const float* bias) {
  if (m <= 0 || n <= 0) return;
  ProblemOf<T> p{{}, b, ldb, n, k, alpha, beta, c, ldc, bias};
  // A transposed (stored k x m) has its rows gathered once, contiguous along k.
  thread_local std::vector<T> gathered;
  if (trans_a) {
    gathered.resize(static_cast<size_t>(m * k));
    for (int64_t q = 0; q < k; ++q)
      for (int64_t i = 0; i < m; ++i) gathered[static_cast<size_t>(i * k + q)] = a[q * lda + i];
  }
  for (int64_t i = 0; i < m; ++i) p.a_rows[i] = trans_a ? gathered.data() + i * k : a + i * lda;
  const int threads = in_parallel() ? 1 : num_threads();
  const double weight_bytes = static_cast<double>(n) * static_cast<double>(k) * sizeof(T);
  if (threads == 1 || weight_bytes < kParallelWeightBytes)
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

}  // namespace

void sgemv_rows(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc, const float* bias) {
  gemv_rows(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias);
}

void sgemv_rows_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const bf16* a, int64_t lda, const bf16* b, int64_t ldb, float beta, float* c,
                     int64_t ldc) {
#if defined(__x86_64__)
  gemv_rows(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nullptr);
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
  (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  throw std::logic_error("sgemv_rows_bf16: AVX512-BF16 exists only on x86-64");
#endif
}

}  // namespace glass::kernels::cpu
