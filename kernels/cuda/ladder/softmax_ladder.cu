// The softmax ladder: y = softmax(x) over each row of x [rows, cols], forward, f32, from naive to
// fast (docs/kernel_ladders.md). Every rung computes the same three steps,
//   m = max_j x_j,   s = sum_j exp(x_j - m),   y_j = exp(x_j - m) / s
// (subtracting the row maximum keeps exp from overflowing), and they differ only in how threads
// are mapped to the data and how they combine their partial results:
//   rung 0  naive         softmax_forward_naive
//   rung 1  coalesced     softmax_forward_coalesced
//   rung 2  warp shuffle  softmax_forward  (production: kernels/cuda/softmax.cu)
//   rung 3  float4        softmax_forward_float4
// Each rung reads x three times and writes y once: the ideal traffic is one read of x and one
// write of y, and the later passes over a row mostly hit the cache.
#include <cmath>

#include "kernels/costs/softmax.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/ladder/block_reduce.h"
#include "kernels/cuda/ladder/ladder_kernels.h"
#include "kernels/cuda/ladder/row_launch.h"
#include "kernels/cuda/vector_row.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

// Rung 0, naive. Mapping: one thread per row (thread i of the grid owns row i), walking it alone.
// Why it is slow: the 32 threads of a warp read 32 different rows, cols floats apart, so each load
// instruction of the warp touches 32 separate memory segments instead of one (uncoalesced); and
// the GPU gets only `rows` threads, far fewer than it needs to hide memory latency.
__global__ void softmax_naive_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * cols;
  float* yr = y + r * cols;
  float m = -INFINITY;
  for (int64_t j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
  float s = 0;
  for (int64_t j = 0; j < cols; ++j) s += expf(xr[j] - m);
  const float inv = 1.0f / s;
  for (int64_t j = 0; j < cols; ++j) yr[j] = expf(xr[j] - m) * inv;
}

// Rung 1, coalesced. Mapping: one block per row (rows = gridDim.x); thread t takes columns t, t +
// blockDim.x, ... What changed: a warp now reads 32 consecutive floats per load (one 128-byte
// segment), and there are rows x blockDim threads. The threads' partial maxima and sums are
// combined serially by thread 0 through shared memory (ladder::block_reduce_serial): correct, but
// blockDim.x - 1 dependent steps while the block waits.
__global__ void softmax_coalesced_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
  m = ladder::block_reduce_serial(m, Max{});
  float s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - m);
  const float inv = 1.0f / ladder::block_reduce_serial(s, Sum{});
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - m) * inv;
}

// Rung 2 is the production kernel (softmax.cu): rung 1 with the serial reduction replaced by warp
// shuffles (a 5-step butterfly in registers per warp, then one value per warp through shared
// memory): log2 steps instead of blockDim.x.

// Rung 3, float4. Mapping: one block per row (rows = gridDim.x), as rung 2, but thread t takes
// float4s t, t + blockDim.x, ... of the row (vector_row.h: a scalar head up to the first
// 16-byte boundary and a scalar tail), with the warp-shuffle reductions of rung 2. What changed:
// 128-bit loads and stores, a quarter of the memory instructions for the same bytes; a block needs
// a quarter of the threads for the same row.
__global__ void softmax_float4_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * cols;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * cols;
  const RowSplit split = split_row(cols, xr, yr);
  float m = -INFINITY;
  for_each_column(xr, split, cols, [&](int64_t, float v) { m = fmaxf(m, v); });
  m = block_reduce(m, Max{});
  float s = 0;
  for_each_column(xr, split, cols, [&](int64_t, float v) { s += expf(v - m); });
  const float inv = 1.0f / block_reduce(s, Sum{});
  map_row(xr, yr, split, cols, [&](int64_t, float v) { return expf(v - m) * inv; });
}

// Checks x and y, then launches `fn` (x, y, rows, cols) with the rung's mapping. Ideal bytes: x
// read and y written once.
void launch_softmax(const char* kernel, void (*fn)(const float*, float*, int64_t, int64_t),
                    ladder::RowMapping mapping, const Tensor& x, const Tensor& y) {
  const ladder::RowShape g = ladder::check_rows(kernel, x, {&x, &y}, {}, {});
  if (g.rows == 0) return;
  const LaunchCost cost =
      rowwise_cost(kSoftmaxForwardFlops, static_cast<double>(x.numel()), {&x, &y});
  const LaunchInfo info = ladder::row_launch_info(kernel, mapping, x, g, cost.flops, cost.bytes);
  launch_cuda_kernel(info, fn, x.data<float>(), y.data<float>(), g.rows, g.cols);
}

}  // namespace

void softmax_forward_naive(const Tensor& x, const Tensor& y) {
  launch_softmax("softmax_forward_naive", softmax_naive_kernel, ladder::RowMapping::thread_per_row,
                 x, y);
}

void softmax_forward_coalesced(const Tensor& x, const Tensor& y) {
  launch_softmax("softmax_forward_coalesced", softmax_coalesced_kernel,
                 ladder::RowMapping::block_per_row, x, y);
}

void softmax_forward_float4(const Tensor& x, const Tensor& y) {
  launch_softmax("softmax_forward_float4", softmax_float4_kernel,
                 ladder::RowMapping::block_per_row_float4, x, y);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
