// The LayerNorm ladder: LayerNorm forward over each row of x [rows, C], f32, from naive to fast
// (docs/kernel_ladders.md). Every rung computes, per row, in two passes as the cpu reference does,
//   mean = sum_j x_j / C,   rstd = 1 / sqrt(sum_j (x_j - mean)^2 / C + eps),
//   y_j = (x_j - mean) * rstd * weight_j + bias_j          (mean and rstd saved for backward)
// and the rungs differ only in how threads are mapped to the data and combine partial sums:
//   rung 0  naive         layernorm_forward_naive
//   rung 1  coalesced     layernorm_forward_coalesced
//   rung 2  warp shuffle  layernorm_forward  (production: kernels/cuda/layernorm.cu)
//   rung 3  float4        layernorm_forward_float4
// The ideal traffic is x read and y written once, plus weight, bias, mean and rstd.
//
// The RMSNorm pair (Llama's norm, kernels/cuda/rmsnorm.cu), f32 or bf16 with f32 sums:
//   rstd = 1 / sqrt(sum_j x_j^2 / C + eps),   y_j = x_j * rstd * weight_j   (rstd saved)
//   rung 0  naive         rmsnorm_forward_naive: rung 0 above without the mean, the centring and
//                         the bias
//   rung 1  vector        rmsnorm_forward  (production: kernels/cuda/rmsnorm.cu), rungs 1-3 above
//                         in one step: a block per row, shuffle reductions, 16-byte vectors
// One statistic instead of two: the sum of squares needs no mean first, so a row is read twice
// (the sum, then y) where LayerNorm's two-pass mean and variance read it three times, and there is
// one reduction per row instead of two. Ideal traffic: x read and y written once, weight, rstd.
#include <cmath>

#include "kernels/costs/norms.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/ladder/block_reduce.h"
#include "kernels/cuda/ladder/ladder_kernels.h"
#include "kernels/cuda/ladder/row_launch.h"
#include "kernels/cuda/vector_row.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

// The kernels' common parameters: x, weight, bias, y, mean, rstd, rows, C, eps.
using LayerNormKernel = void (*)(const float*, const float*, const float*, float*, float*, float*,
                                 int64_t, int64_t, float);

// Rung 0, naive. Mapping: one thread per row (thread i of the grid owns row i), walking it alone.
// Why it is slow: the 32 threads of a warp read 32 different rows, C floats apart (uncoalesced:
// 32 memory segments per load instruction instead of one), and there are only `rows` threads.
__global__ void layernorm_naive_kernel(const float* x, const float* weight, const float* bias,
                                       float* y, float* mean, float* rstd, int64_t rows, int64_t C,
                                       float eps) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* xr = x + r * C;
  float* yr = y + r * C;
  float s = 0;
  for (int64_t j = 0; j < C; ++j) s += xr[j];
  const float m = s / static_cast<float>(C);
  float v = 0;
  for (int64_t j = 0; j < C; ++j) v += (xr[j] - m) * (xr[j] - m);
  const float rs = 1.0f / sqrtf(v / static_cast<float>(C) + eps);
  for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - m) * rs * weight[j] + bias[j];
  mean[r] = m;
  rstd[r] = rs;
}

// Rung 1, coalesced. Mapping: one block per row (rows = gridDim.x); thread t takes columns t,
// t + blockDim.x, ... What changed: a warp reads 32 consecutive floats per load (one 128-byte
// segment), and there are rows x blockDim threads. The partial sums are added serially by thread
// 0 through shared memory (ladder::block_reduce_serial): blockDim.x - 1 dependent additions.
__global__ void layernorm_coalesced_kernel(const float* x, const float* weight, const float* bias,
                                           float* y, float* mean, float* rstd, int64_t rows,
                                           int64_t C, float eps) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * C;
  float* yr = y + r * C;
  float s = 0;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) s += xr[j];
  const float m = ladder::block_reduce_serial(s, Sum{}) / static_cast<float>(C);
  float v = 0;
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x) v += (xr[j] - m) * (xr[j] - m);
  const float rs =
      1.0f / sqrtf(ladder::block_reduce_serial(v, Sum{}) / static_cast<float>(C) + eps);
  for (int64_t j = threadIdx.x; j < C; j += blockDim.x)
    yr[j] = (xr[j] - m) * rs * weight[j] + bias[j];
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
}

// Rung 2 is the production kernel (layernorm.cu): rung 1 with the serial reduction replaced by
// warp shuffles (a 5-step butterfly in registers per warp, then one value per warp through shared
// memory): log2 steps instead of blockDim.x.

// Rung 3, float4. Mapping: one block per row (rows = gridDim.x), thread t takes float4s t,
// t + blockDim.x, ... of the row (vector_row.h: a scalar head up to the first 16-byte
// boundary and a scalar tail), with the warp-shuffle reductions of rung 2. What changed: 128-bit
// loads and stores of x and y, a quarter of the memory instructions for the same bytes. weight
// and bias are read as scalars: a row's float4s start at any column, so weight + j is not 16-byte
// aligned in general; they are C floats every row reuses, served by the cache.
__global__ void layernorm_float4_kernel(const float* x, const float* weight, const float* bias,
                                        float* y, float* mean, float* rstd, int64_t rows, int64_t C,
                                        float eps) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * C;
  float* yr = y + r * C;
  const RowSplit split = split_row(C, xr, yr);
  float s = 0;
  for_each_column(xr, split, C, [&](int64_t, float xj) { s += xj; });
  const float m = block_reduce(s, Sum{}) / static_cast<float>(C);
  float v = 0;
  for_each_column(xr, split, C, [&](int64_t, float xj) { v += (xj - m) * (xj - m); });
  const float rs = 1.0f / sqrtf(block_reduce(v, Sum{}) / static_cast<float>(C) + eps);
  map_row(xr, yr, split, C,
          [&](int64_t j, float xj) { return (xj - m) * rs * weight[j] + bias[j]; });
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
}

// Checks the tensors, then launches `fn` with the rung's mapping.
void launch_layernorm(const char* kernel, LayerNormKernel fn, ladder::RowMapping mapping,
                      const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd, double eps) {
  const ladder::RowShape g =
      ladder::check_rows(kernel, x, {&x, &y}, {&mean, &rstd}, {&weight, &bias});
  if (g.rows == 0) return;
  const LaunchCost cost = layernorm_forward_cost(x, nullptr, nullptr, weight, bias, y, mean, rstd);
  const LaunchInfo info = ladder::row_launch_info(kernel, mapping, x, g, cost.flops, cost.bytes);
  launch_cuda_kernel(info, fn, x.data<float>(), weight.data<float>(), bias.data<float>(),
                     y.data<float>(), mean.data<float>(), rstd.data<float>(), g.rows, g.cols,
                     static_cast<float>(eps));
}

// RMSNorm rung 0, naive. Mapping: one thread per row, as layernorm_naive_kernel, and slow for the
// same reasons (a warp's 32 loads fall in 32 rows, C elements apart; only `rows` threads). T is
// float or bf16; the sum and the scaling run in f32 (to_compute), y is rounded once into T.
template <class T>
__global__ void rmsnorm_forward_naive_kernel(const T* x, const T* weight, T* y, float* rstd,
                                             int64_t rows, int64_t C, float eps) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const T* xr = x + r * C;
  T* yr = y + r * C;
  float s = 0;
  for (int64_t j = 0; j < C; ++j) s += to_compute(xr[j]) * to_compute(xr[j]);
  const float rs = 1.0f / sqrtf(s / static_cast<float>(C) + eps);
  for (int64_t j = 0; j < C; ++j)
    yr[j] = from_compute<T>(to_compute(xr[j]) * rs * to_compute(weight[j]));
  rstd[r] = rs;
}

// RMSNorm rung 1 is the production kernel (rmsnorm.cu): one block per row, threads striding over
// the row in 16-byte vectors (4 floats or 8 bf16, vector_row.h), the sum of squares combined by
// the warp-shuffle block_reduce; the second pass reads back the vectors the thread read in the
// first. It is LayerNorm rungs 1 to 3 taken together.

}  // namespace

void rmsnorm_forward_naive(const Tensor& x, const Tensor& weight, const Tensor& y,
                           const Tensor& rstd, double eps) {
  constexpr const char* kernel = "rmsnorm_forward_naive";
  const ladder::RowShape g = ladder::check_rows(kernel, x, {&x, &y}, {&rstd}, {&weight}, true);
  if (g.rows == 0) return;
  // the production kernel's cost
  const LaunchCost cost = rmsnorm_forward_cost(x, nullptr, nullptr, weight, y, rstd);
  const LaunchInfo info = ladder::row_launch_info(kernel, ladder::RowMapping::thread_per_row, x, g,
                                                  cost.flops, cost.bytes);
  visit_f32_bf16(x, kernel, [&]<class T>() {
    launch_cuda_kernel(info, rmsnorm_forward_naive_kernel<T>, x.data<T>(), weight.data<T>(),
                       y.data<T>(), rstd.data<float>(), g.rows, g.cols, static_cast<float>(eps));
  });
}

void layernorm_forward_naive(const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps) {
  launch_layernorm("layernorm_forward_naive", layernorm_naive_kernel,
                   ladder::RowMapping::thread_per_row, x, weight, bias, y, mean, rstd, eps);
}

void layernorm_forward_coalesced(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                 const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                 double eps) {
  launch_layernorm("layernorm_forward_coalesced", layernorm_coalesced_kernel,
                   ladder::RowMapping::block_per_row, x, weight, bias, y, mean, rstd, eps);
}

void layernorm_forward_float4(const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps) {
  launch_layernorm("layernorm_forward_float4", layernorm_float4_kernel,
                   ladder::RowMapping::block_per_row_float4, x, weight, bias, y, mean, rstd, eps);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
