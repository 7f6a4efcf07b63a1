// Shared helpers for the `cpu` kernels: type dispatch, launch info, threading, strided loops, GEMM
// through OpenBLAS, and the row primitives (max, sum, dot, masked softmax) that softmax, layernorm
// and attention share.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#include "engine/launch.h"
#include "engine/tensor.h"
#include "kernels/backend.h"
#include "kernels/cpu/element.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/threads.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/merge_dims.h"
#include "kernels/shape_checks.h"

namespace glass::kernels::cpu {

// LaunchInfo for a cpu kernel: grid.x = independent work items, block.x = threads used.
inline LaunchInfo cpu_launch_info(const char* kernel, int64_t work_items, double flops,
                                  double bytes, ComputeUnit unit = ComputeUnit::cuda_core) {
  LaunchInfo info;
  info.kernel = kernel;
  info.device = kCPU;
  info.grid = {static_cast<unsigned>(std::min<int64_t>(work_items, UINT32_MAX)), 1, 1};
  info.block = {static_cast<unsigned>(num_threads()), 1, 1};
  info.flops = flops;
  info.bytes = bytes;
  info.unit = unit;
  return info;
}

// The unit the FLOPs of a product of T values run on, whose roof judges its launch
// (engine/launch.h): for bf16, AVX512-BF16's dot products where sgemm_bf16's vdpbf16ps path runs
// (the bf16 peak); else, and on its f32 conversion path (and the scalar model of flash attention's
// products), the FMA units.
template <class T>
ComputeUnit product_unit() {
  return std::is_same_v<T, bf16> && bf16_gemm_fast_path() ? ComputeUnit::tensor_core_bf16
                                                          : ComputeUnit::cuda_core;
}

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelGrain = 1 << 15;

// Whether `items` independent work items doing `elements` of work in all are worth threading.
inline bool worth_threading(int64_t items, int64_t elements) {
  return items > 1 && elements >= kParallelGrain;
}

// fn(r) for every row r < rows, in parallel when worth_threading(rows, elements): the pool's
// chunks are runs of consecutive rows (kernels/cpu/threads.h). A row is any independent unit of a
// kernel's work: a tensor row, a fixed chunk of rows, an attention slice.
template <class Fn>
void for_each_row(int64_t rows, int64_t elements, Fn&& fn) {
  parallel_ranges(rows, worth_threading(rows, elements), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

// A loop over the elements of a shape in row-major order, for N operands with their own strides.
// The last dimension is the inner run, cut into pieces of at most kRunPiece elements; the other
// dimensions are the rows. fn(offsets, inner_strides, len) handles one piece, with offsets[i] the
// element offset of operand i at the piece's start. The pieces are split evenly over the threads
// when there is enough work, as the pool's chunks; each chunk finds its first piece once and steps
// through the rest like an odometer, so no index is divided per row.
template <size_t N>
struct StridedLoop : MergedDims<N> {
  static constexpr int64_t kRunPiece = 1 << 13;
  using MergedDims<N>::shape;
  using MergedDims<N>::strides;

  template <class Fn>
  void run(Fn&& fn) const {
    const int nd = static_cast<int>(shape.size());
    const int64_t inner = nd ? shape[nd - 1] : 1;
    std::array<int64_t, N> inner_stride{};
    for (size_t i = 0; i < N; ++i) inner_stride[i] = nd ? strides[i][nd - 1] : 0;
    int64_t rows = 1;
    for (int d = 0; d + 1 < nd; ++d) rows *= shape[d];
    if (rows == 0 || inner == 0) return;
    const int64_t pieces_per_row = (inner + kRunPiece - 1) / kRunPiece;
    const int64_t pieces = rows * pieces_per_row;
    parallel_ranges(pieces, worth_threading(pieces, rows * inner), [&](int64_t begin, int64_t end) {
      // 1. the row index (one digit per outer dimension) and offsets of the first piece
      Shape digit(static_cast<size_t>(std::max(nd - 1, 0)));
      std::array<int64_t, N> row_off{};
      for (int64_t d = nd - 2, rem = begin / pieces_per_row; d >= 0; --d) {
        digit[d] = rem % shape[d];
        rem /= shape[d];
        for (size_t i = 0; i < N; ++i) row_off[i] += digit[d] * strides[i][d];
      }
      int64_t piece = begin % pieces_per_row;
      for (int64_t w = begin; w < end; ++w) {
        // 2. this piece of the row
        const int64_t start = piece * kRunPiece;
        std::array<int64_t, N> off;
        for (size_t i = 0; i < N; ++i) off[i] = row_off[i] + start * inner_stride[i];
        fn(off, inner_stride, std::min(kRunPiece, inner - start));
        // 3. the next piece: the row's next, or the first of the next row (odometer step)
        if (++piece < pieces_per_row) continue;
        piece = 0;
        for (int d = nd - 2; d >= 0; --d) {
          for (size_t i = 0; i < N; ++i) row_off[i] += strides[i][d];
          if (++digit[d] < shape[d]) break;
          for (size_t i = 0; i < N; ++i) row_off[i] -= shape[d] * strides[i][d];
          digit[d] = 0;
        }
      }
    });
  }
};

// The loop over `shape` for N operands, its dimensions merged (kernels/merge_dims.h).
template <size_t N>
StridedLoop<N> simplify(const Shape& shape, const std::array<Shape, N>& strides) {
  return {merge_dims<N>(shape, strides)};
}

// C = alpha op(A) op(B) + beta C, row-major: op(A) is m x k, op(B) k x n, C m x n (sizes and
// leading dimensions checked to fit an int by the caller). f32 runs glass's own GEMM
// (kernels/cpu/sgemm.cpp: it follows the ISA glass is built for, where OpenBLAS picks its kernel
// from a table of CPU models), which may skip the zeros `causal` names; f64, used by gradcheck,
// runs OpenBLAS's dgemm, which computes the whole product (the same wanted entries).
inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                      const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                      float* c, int64_t ldc, Causal causal = {}) {
  sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, {.causal = causal});
}
inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                      const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                      double* c, int64_t ldc, Causal = {}) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m),
              int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// The cpu `gemm` entry that also writes op(A)'s row sums into a_row_sums ([m], batch 1): the bias
// gradient of a linear layer (GemmBiasGrad::rows_of_a), taken while the GEMM packs A, so A is
// read once. One launch, `gemm_bgrad_a` (kernels/cpu/gemm.cpp).
void gemm_with_row_sums_of_a(const GemmArgs& g, const Tensor& a_row_sums);

// The checks every cpu GEMM entry makes first (sizes, one dtype, leading dimensions and batch
// strides against each operand's storage): an error naming the operand (kernels/cpu/gemm.cpp).
void check_gemm_args(const GemmArgs& g);

// The bf16 GEMM, plain or with an epilogue (kernels/cpu/gemm_bf16.cpp): the product and the
// epilogue in f32, each result rounded to bf16 once, as cuBLASLt's bf16 GEMM does. Arguments
// checked by the caller (check_gemm_args, and check_gemm_epilogue for an epilogue).
void gemm_bf16(const GemmArgs& g, const GemmEpilogue& e);
// gelu_backward (kernels/cpu/elementwise.cpp) with a bf16 x and f32 dy and dx: x read exactly, the
// same f32 math, so the bits of gelu_backward on x widened to f32; one launch, `gelu_backward`.
// For gemm_bf16's dGELU epilogue, whose aux is bf16 and whose pre is f32.
void gelu_backward_of_bf16(const Tensor& x, const Tensor& dy, const Tensor& dx);
// The bf16 dGELU epilogue with the bias gradient of C's columns in one pass (kernels/cpu/
// reduce.cpp), for pre (f32, rows x cols, row stride cols) and aux (bf16, the same layout): out =
// pre gelu'(aux) in f32, C = bf16(out) (row stride ldc), sums[i] = bf16 of the sum of column i
// of out. The bits of gelu_backward_of_bf16, sum_dim (f32) and the rounding of both, run
// one after the other, with two fifths of their memory traffic: pre is read once, never written.
// One launch, `gelu_backward_column_sums`.
void gelu_backward_column_sums_bf16(const float* pre, const bf16* aux, int64_t rows, int64_t cols,
                                    bf16* c, int64_t ldc, bf16* sums);
// The range exp_vectorisable clamps its argument to, [-87, 88], where 2^k stays a normal float.
// Defined in kernels/cpu/exp_range.cpp, out of the compiler's sight on purpose: with the values
// known where exp_vectorisable is inlined, GCC 12 computed exp(-87) and exp(88) ahead of time and
// gave every vector three mask operations, a masked form of each step of the polynomial and two
// blends of those constants, which made the exp 1.7x slower (a vector of 16 in 4.6 ns instead of
// 2.8). Read as plain values, the clamp is one vmaxps and one vminps, with the same results.
extern const float kExpArgumentMin, kExpArgumentMax;

// e^x in a form the compiler vectorises (libm's expf is a call per element). f32: x = k ln2 + r
// with |r| <= ln2/2 (ln2 split in two parts so k ln2 is exact), e^r by its Taylor polynomial to
// r^7 (truncation below 1e-8 relative), and 2^k written into the exponent bits. x is clamped to
// [kExpArgumentMin, kExpArgumentMax] first. f64 (gradcheck) uses std::exp. The last term is
// r * c7, not r / 5040: a division by a constant stays a (slow) vector division, and GELU's loop
// ran 8% faster without it.
inline float exp_vectorisable(float x) {
  x = std::min(std::max(x, kExpArgumentMin), kExpArgumentMax);
  // k = round(x / ln2): adding 1.5 * 2^23 rounds to an integer in float arithmetic (no libm).
  const float k = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  // e^r by Horner's rule, with 1/n! as constants
  constexpr float c2 = 1.f / 2, c3 = 1.f / 6, c4 = 1.f / 24, c5 = 1.f / 120, c6 = 1.f / 720,
                  c7 = 1.f / 5040;
  const float p = 1 + r * (1 + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * (c6 + r * c7))))));
  return p * std::bit_cast<float>((static_cast<int32_t>(k) + 127) << 23);
}

inline double exp_vectorisable(double x) { return std::exp(x); }

// --- row primitives: contiguous rows of n elements, sums in compute_t<T> (f32 for bf16),
// vectorised ---

// to[j] = bf16(from[j]) for j < n: each f32 rounded once to nearest even, bf16::from_float's bits.
// On AVX512-BF16, 32 values per instruction (kernels/cpu/round_bf16.cpp), about twice as fast as
// the rule written per element, which GCC vectorises into integer steps. GCC vectorises a loop
// that stores bf16 32 entries at a time (a 512-bit vector of 16-bit values), so a loop of 16
// entries with a bf16 store in it runs on 256-bit halves: rows computed in 16-entry blocks round
// here, in a pass of their own. A call per short row costs more than it saves (flash attention's
// P and dS rows, bench/RESULTS.md 2026-12-07): there the rule stays inside the loop.
void round_row_to_bf16(const float* from, bf16* to, int64_t n);

template <class T>
compute_t<T> row_max(const T* x, int64_t n) {
  using C = compute_t<T>;
  C m = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = to_compute(x[j]) > m ? to_compute(x[j]) : m;
  return m;
}

template <class T>
compute_t<T> row_sum(const T* x, int64_t n) {
  compute_t<T> s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += to_compute(x[j]);
  return s;
}

template <class T>
compute_t<T> row_dot(const T* a, const T* b, int64_t n) {
  compute_t<T> s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += to_compute(a[j]) * to_compute(b[j]);
  return s;
}

// A row's logsumexp, max + log(sum_j exp(x_j - max)), kept in its two parts: x - max is exact
// for the entries near the max, so x - logsumexp taken as (x - max) - log_sum stays accurate when
// the logits are large (|x| ~ 1000 in f32 would otherwise lose the last 4 digits).
template <class T>
struct LogSumExp {
  T max, log_sum;
  T value() const { return max + log_sum; }
};

// masked_softmax_row (below) entry by entry, for a row without room for whole blocks.
template <class T>
LogSumExp<T> masked_softmax_row_plain(const T* x, T* y, int64_t len, int64_t cols) {
  const T m = row_max(x, len);
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < len; ++j) {
    y[j] = exp_vectorisable(x[j] - m);
    sum += y[j];
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) y[j] *= inv;
  std::fill(y + len, y + cols, T(0));
  return {m, std::log(sum)};
}

// Causal rows (lengths 1, 2, 3, ...) in whole vectors. A loop over `len` entries leaves the
// compiler a scalar remainder of up to 15 entries, each as dear as a 16-lane vector when it is an
// exp: for attention's rows the remainders took longer than the vectors. These loops run blocks
// of kRowLanes (16 floats, the widest vector: AVX-512) up to `run` = len rounded up to a block,
// which the row must have room for, and mask the entries from len on with a select, so every
// block is one vector and nothing is left over.
constexpr int64_t kRowLanes = 16;
inline int64_t whole_blocks(int64_t len) { return (len + kRowLanes - 1) / kRowLanes * kRowLanes; }

// f(j, lane, entry_is_live) for every j = block + lane of the blocks covering [0, len), one block
// at a time; per-lane state indexed by `lane` stays in one vector register. The whole blocks call
// f with a constant `true`, so their vector body has no mask; only the last, partial block
// computes one (with the mask in every block, GCC built each from 256-bit halves and 64-bit
// compares, and attention's bf16 softmax rows ran at a third of the speed).
template <class F>
[[gnu::always_inline]] inline void for_each_in_blocks(int64_t len, F f) {
  const int64_t whole = len / kRowLanes * kRowLanes;
  for (int64_t block = 0; block < whole; block += kRowLanes)
#pragma omp simd
    for (int64_t lane = 0; lane < kRowLanes; ++lane) f(block + lane, lane, true);
  if (whole == len) return;
#pragma omp simd
  for (int64_t lane = 0; lane < kRowLanes; ++lane) f(whole + lane, lane, whole + lane < len);
}

// Sums over j < n of value(q, j) for each of kRows rows q at once, each in one fixed order that
// depends on nothing but n: kRowLanes lane sums (lane l adds the entries j = l, l + 16, ... in
// turn), then the lanes halved pairwise (lane l + lane l + 8, then l + 4, l + 2, l + 1). A short
// row's sum is a chain of dependent adds; the rows of a group run theirs side by side, and the
// lanes' tree is 4 adds deep where a sum of the lanes in turn (GCC's for `omp simd reduction`) is
// 16 or 32. `value` must be pure: it may be called for the rows' entries in any order.
template <int kRows, class A, class F>
[[gnu::always_inline]] inline void row_group_sums(int64_t n, F value, A (&sums)[kRows]) {
  A lane[kRows][kRowLanes] = {};
  const int64_t whole = n / kRowLanes * kRowLanes;
  // the rows' loop unrolled: with q a variable, a row's pointer is not an affine base for GCC, and
  // the lanes' loop stayed scalar (the LayerNorm backward that tried this ran 4.6x slower)
  for (int64_t block = 0; block < whole; block += kRowLanes)
#pragma GCC unroll 16
    for (int q = 0; q < kRows; ++q)
#pragma omp simd
      for (int64_t l = 0; l < kRowLanes; ++l) lane[q][l] += value(q, block + l);
  for (int q = 0; q < kRows; ++q) {
    for (int64_t l = 0; whole + l < n; ++l) lane[q][l] += value(q, whole + l);
    for (int64_t width = kRowLanes / 2; width >= 1; width /= 2)
      for (int64_t l = 0; l < width; ++l) lane[q][l] += lane[q][l + width];
    sums[q] = lane[q][0];
  }
}

// A row of a softmax whose entries from `len` on are masked out (len == cols: no mask):
// y[j] = exp(x[j] - max) / sum(exp(x - max)) over j < len, y[j] = 0 for len <= j < cols. The
// masked entries of x are never used (they may be anything, even NaN). Subtracting the max keeps
// exp from overflowing and cancels out. y may be x. Returns the row's logsumexp over the unmasked
// entries (what flash attention saves for its backward). Where the row has room, it goes in whole
// blocks (above); a row without (cols not a multiple of 16) goes entry by entry.
template <class T>
LogSumExp<T> masked_softmax_row(const T* x, T* y, int64_t len, int64_t cols) {
  if (whole_blocks(len) > cols) return masked_softmax_row_plain(x, y, len, cols);
  // 1. the max, lane by lane
  T lane_max[kRowLanes];
  std::fill(lane_max, lane_max + kRowLanes, -std::numeric_limits<T>::infinity());
  for_each_in_blocks(len, [&](int64_t j, int64_t lane, bool live) {
    lane_max[lane] = live && x[j] > lane_max[lane] ? x[j] : lane_max[lane];
  });
  const T m = *std::max_element(lane_max, lane_max + kRowLanes);
  // 2. exponentiate the shifted entries and sum them, lane by lane, then the lanes in order
  T lane_sum[kRowLanes] = {};
  for_each_in_blocks(len, [&](int64_t j, int64_t lane, bool live) {
    const T e = exp_vectorisable(x[j] - m);
    y[j] = live ? e : T(0);
    lane_sum[lane] += y[j];
  });
  T sum = 0;
  for (T part : lane_sum) sum += part;
  // 3. normalise; the masked entries are 0
  const T inv = T(1) / sum;
  for_each_in_blocks(len, [&](int64_t j, int64_t, bool) { y[j] *= inv; });
  std::fill(y + whole_blocks(len), y + cols, T(0));
  return {m, std::log(sum)};
}

// Its backward, from the row's output y and gradient dy: dx = y * (dy - sum(dy * y)) over j < len,
// 0 for the masked entries (where y is 0). dx may be dy.
template <class T>
void masked_softmax_backward_row(const T* y, const T* dy, T* dx, int64_t len, int64_t cols) {
  const T dot = row_dot(dy, y, len);
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) dx[j] = y[j] * (dy[j] - dot);
  for (int64_t j = len; j < cols; ++j) dx[j] = 0;
}

// `exp` is libm's by default; a hot loop may pass exp_vectorisable.
template <class T, class Exp>
LogSumExp<compute_t<T>> row_logsumexp(const T* x, int64_t n, Exp exp) {
  using C = compute_t<T>;
  const C m = row_max(x, n);
  C s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += exp(to_compute(x[j]) - m);
  return {m, std::log(s)};
}
template <class T>
LogSumExp<compute_t<T>> row_logsumexp(const T* x, int64_t n) {
  return row_logsumexp(x, n, [](compute_t<T> v) { return std::exp(v); });
}

// Throws on the first target outside [0, V) that is not ignore_index (naming `kernel`, the row
// and the value); returns how many rows count.
inline int64_t count_valid_targets(const char* kernel, const Tensor& targets, int64_t V,
                                   int64_t ignore_index) {
  const int32_t* t = targets.data<int32_t>();
  int64_t valid = 0;
  for (int64_t r = 0; r < targets.numel(); ++r) {
    if (t[r] == ignore_index) continue;
    GLASS_CHECK(t[r] >= 0 && t[r] < V,
                "{}: target {} at row {} is outside [0, {}) and is not ignore_index ({})", kernel,
                t[r], r, V, ignore_index);
    ++valid;
  }
  return valid;
}

}  // namespace glass::kernels::cpu
