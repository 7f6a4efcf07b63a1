// cpu reductions: sum over one dimension, and the sum of squares for global-norm clipping.
//
// Determinism: the work is cut into chunks whose size depends only on the shape, each chunk is
// summed in a fixed order into a double partial, and the partials are combined in chunk order.
// Threads only decide which chunk runs where, never the order of additions, so results are
// bit-identical whatever the thread count. Accumulating in double keeps long f32 sums accurate;
// the kernels are memory-bound, so the wider adds cost nothing. bf16 inputs are read exactly
// (kernels/cpu/element.h) and a bf16 sum_dim output is rounded once, from the double total
// through f32 (as a f32 -> bf16 cast rounds).
#include <vector>

#include "kernels/costs/elementwise.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gelu.h"
#include "kernels/reduce_checks.h"

namespace glass::kernels::cpu {

namespace {

constexpr int64_t kChunkElems = 1 << 16;  // elements one work item sums (about)
constexpr int64_t kMinChunkRows = 16;     // rows per chunk at least, so partials stay small
constexpr int64_t kColBlock = 1024;       // columns per work item when summing across rows
constexpr int kSumLanes = 8;              // interleaved accumulators: vectorisable, fixed order

// Sum of f(x[j]) for j < n in double: kSumLanes interleaved partial sums, combined in lane order.
template <class T, class F>
double lane_sum(const T* x, int64_t n, F f) {
  double acc[kSumLanes] = {};
  int64_t j = 0;
  for (; j + kSumLanes <= n; j += kSumLanes)
    for (int l = 0; l < kSumLanes; ++l) acc[l] += f(static_cast<double>(to_compute(x[j + l])));
  for (int l = 0; j < n; ++j, ++l) acc[l] += f(static_cast<double>(to_compute(x[j])));
  double s = 0;
  for (int l = 0; l < kSumLanes; ++l) s += acc[l];
  return s;
}

// Column sums over the rows of [outer, n, inner] in a fixed order whatever the threads: work
// items (o, chunk of rows, block of columns), the cuts a function of the shape alone;
// add_rows(o, r0, r1, i0, i1, acc) adds rows [r0, r1) of columns [i0, i1) to the chunk's double
// partials acc[i], rows ascending; then each output's partials are added in chunk order and its
// total passed to store(o, i, total). sum_dim and the bf16 dGELU pass share it, so their sums
// have one order.
template <class AddRows, class Store>
void column_sums(int64_t outer, int64_t n, int64_t inner, AddRows add_rows, Store store) {
  const int64_t cols_per_block = std::min(inner, kColBlock);
  const int64_t col_blocks = (inner + cols_per_block - 1) / cols_per_block;
  const int64_t rows_per_chunk = std::max(kMinChunkRows, kChunkElems / cols_per_block);
  const int64_t chunks = std::max<int64_t>(1, (n + rows_per_chunk - 1) / rows_per_chunk);
  std::vector<double> partial(static_cast<size_t>(outer * chunks * inner), 0.0);
  for_each_row(outer * chunks * col_blocks, outer * n * inner, [&](int64_t w) {
    const int64_t o = w / (chunks * col_blocks), c = w / col_blocks % chunks, b = w % col_blocks;
    const int64_t r0 = c * rows_per_chunk, r1 = std::min(n, r0 + rows_per_chunk);
    const int64_t i0 = b * cols_per_block, i1 = std::min(inner, i0 + cols_per_block);
    add_rows(o, r0, r1, i0, i1, partial.data() + (o * chunks + c) * inner);
  });
  // Each output's partials added in chunk order, accumulated into chunk 0's slot, then stored.
  for_each_row(outer * col_blocks, outer * chunks * inner, [&](int64_t w) {
    const int64_t o = w / col_blocks, b = w % col_blocks;
    const int64_t i0 = b * cols_per_block, i1 = std::min(inner, i0 + cols_per_block);
    double* total = partial.data() + o * chunks * inner;
    for (int64_t c = 1; c < chunks; ++c)
      for (int64_t i = i0; i < i1; ++i) total[i] += total[c * inner + i];
    for (int64_t i = i0; i < i1; ++i) store(o, i, total[i]);
  });
}

// out[o, i] = sum over r of x[o, r, i], for x contiguous [outer, n, inner].
template <class T>
void sum_dim_typed(const T* x, T* out, int64_t outer, int64_t n, int64_t inner) {
  if (outer * inner == 0) return;
  column_sums(
      outer, n, inner,
      [&](int64_t o, int64_t r0, int64_t r1, int64_t i0, int64_t i1, double* acc) {
        const T* src = x + (o * n + r0) * inner;
        // Row sums (inner == 1) run along memory; otherwise rows are added column-wise in order.
        if (inner == 1) {
          acc[0] = lane_sum(src, r1 - r0, [](double v) { return v; });
          return;
        }
        for (int64_t r = r0; r < r1; ++r, src += inner)
          for (int64_t i = i0; i < i1; ++i) acc[i] += static_cast<double>(to_compute(src[i]));
      },
      [&](int64_t o, int64_t i, double total) {
        out[o * inner + i] = from_compute<T>(static_cast<compute_t<T>>(total));
      });
}

}  // namespace

void sum_dim(const Tensor& x, const Tensor& out, int dim) {
  const SumDimShape shape = check_sum_dim(x, out, dim);
  const int64_t outer = shape.outer, n = shape.n, inner = shape.inner;
  launch(cpu_launch_info("sum_dim", outer * inner, static_cast<double>(x.numel()),
                         static_cast<double>(x.nbytes() + out.nbytes())),
         [&] {
           visit_element(x, "sum_dim", [&]<class T>() {
             sum_dim_typed(x.data<T>(), out.data<T>(), outer, n, inner);
           });
         });
}

void gelu_backward_column_sums_bf16(const float* pre, const bf16* aux, int64_t rows, int64_t cols,
                                    bf16* c, int64_t ldc, bf16* sums) {
  if (rows * cols == 0) return;
  const double elements = static_cast<double>(rows * cols);
  // read pre (f32) and aux, write C (bf16 each)
  launch(cpu_launch_info("gelu_backward_column_sums", rows, (kGeluBackwardFlops + 1) * elements,
                         8 * elements),
         [&] {
           column_sums(
               1, rows, cols,
               // out = pre gelu'(aux) in f32 (gelu_backward_of_bf16's value), added to its column's
               // partial (sum_dim's order) and rounded into C (the rounding pass's value)
               [&](int64_t, int64_t r0, int64_t r1, int64_t i0, int64_t i1, double* acc) {
                 alignas(64) float out[kColBlock];  // a row's block in f32, then rounded at once
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* pre_row = pre + r * cols + i0;
                   const bf16* aux_row = aux + r * cols + i0;
                   double* acc_row = acc + i0;
#pragma omp simd
                   for (int64_t i = 0; i < i1 - i0; ++i) {
                     out[i] = gelu_backward_of(aux_row[i].to_float(), pre_row[i]);
                     acc_row[i] += static_cast<double>(out[i]);
                   }
                   round_row_to_bf16(out, c + r * ldc + i0, i1 - i0);
                 }
               },
               // the sums as sum_dim stores them in f32, then rounded once to bf16
               [&](int64_t, int64_t i, double total) {
                 sums[i] = bf16::from_float(static_cast<float>(total));
               });
         });
}

void sum_squares(std::span<const Tensor> xs, const Tensor& out) {
  check_sum_squares(xs, out);
  // Fixed-size chunks of every tensor, in tensor order; each chunk a lane sum of squares, the
  // partials then added in chunk order.
  struct Chunk {
    const Tensor* x;
    int64_t begin, size;
  };
  std::vector<Chunk> chunks;
  double n = 0, bytes = static_cast<double>(out.nbytes());
  for (const Tensor& x : xs) {
    for (int64_t b = 0; b < x.numel(); b += kChunkElems)
      chunks.push_back({&x, b, std::min(kChunkElems, x.numel() - b)});
    n += static_cast<double>(x.numel());
    bytes += static_cast<double>(x.nbytes());
  }
  const auto count = static_cast<int64_t>(chunks.size());
  launch(cpu_launch_info("sum_squares", count, 2.0 * n, bytes), [&] {
    std::vector<double> partial(chunks.size());
    parallel_ranges(count, n >= kParallelGrain, [&](int64_t first, int64_t last) {
      for (int64_t c = first; c < last; ++c) {
        const Chunk& k = chunks[c];
        visit_element(*k.x, "sum_squares", [&]<class T>() {
          partial[c] = lane_sum(k.x->data<T>() + k.begin, k.size, [](double v) { return v * v; });
        });
      }
    });
    double total = 0;
    for (double s : partial) total += s;
    visit_float(out, "sum_squares", [&]<class T>() { out.data<T>()[0] = static_cast<T>(total); });
  });
}

}  // namespace glass::kernels::cpu
