// CUDA kernels for the softmax family on the last dimension: softmax, log-softmax and the fused
// cross-entropy, each with its backward (contracts in kernels/kernel_list.inc; the cpu reference is
// kernels/cpu/softmax.cpp).
//
// Thread mapping: a tensor is seen as [rows, cols]; one block per row (grid.x = rows), its threads
// striding over the columns (thread t takes columns t, t + blockDim, ...), so a warp reads 32
// consecutive floats at a time (coalesced). Short rows get a one-warp block. Row maxima and sums
// are block reductions: butterfly shuffles inside each warp, then the warps' results combined in
// warp order through shared memory. Every order is fixed by the code, so results are bit-identical
// run to run. As on cpu, every row subtracts its maximum before exponentiating, and the logsumexp
// is kept as max + log(sum) so that x - lse = (x - max) - log(sum) stays accurate for large logits.
//
// Cross-entropy targets are checked on the device by check_targets (classifier.cu): a one-block
// kernel counts the rows that are not ignore_index (written to `valid` as a float; integer counts
// are exact) and raises a device error flag for a target outside [0, V), which the next host read
// turns into an error naming row and value; the row kernels skip such a target (loss NaN,
// gradient 0), so nothing is read out of bounds and the host never waits. Elements are f32 or bf16
// (f64 is for gradcheck on cpu); with bf16 logits the losses and logsumexps stay f32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "kernels/costs/softmax.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kMaxThreadsPerRow = 512;

// max_j x[j] over one row, by the whole block.
template <class T>
__device__ float row_max(const T* x, int64_t cols) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = to_compute(x[j]);
    m = v > m ? v : m;
  }
  return block_reduce(m, Max{});
}

// A row's logsumexp in its two parts, max + log(sum_j exp(x_j - max)).
struct LogSumExp {
  float max, log_sum;
};

template <class T>
__device__ LogSumExp row_logsumexp(const T* x, int64_t cols) {
  const float m = row_max(x, cols);
  float s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(to_compute(x[j]) - m);
  return {m, logf(block_reduce(s, Sum{}))};
}

// Every kernel below is templated on the stored element type T (float or bf16); loads convert to
// f32 (to_compute), all math and every sum is f32, and each output element is rounded once when
// stored (from_compute).

// ---------------------------------------------------------------------------------------------
// softmax: y = exp(x - max) / sum(exp(x - max))
template <class T>
__global__ void softmax_forward_kernel(const T* x, T* y, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
  const T* xr = x + row;
  T* yr = y + row;
  const float m = row_max(xr, cols);
  // 1. sum the exponentials of the shifted row
  float s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += expf(to_compute(xr[j]) - m);
  // 2. normalise (each thread recomputes the exponentials of its columns: no rounded
  //    intermediate is stored)
  const float inv = 1.0f / block_reduce(s, Sum{});
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    yr[j] = from_compute<T>(expf(to_compute(xr[j]) - m) * inv);
}

// softmax backward: dx = y * (dy - sum(dy * y))
template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
  const T *yr = y + row, *dyr = dy + row;
  T* dxr = dx + row;
  float dot = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dot += to_compute(dyr[j]) * to_compute(yr[j]);
  dot = block_reduce(dot, Sum{});
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dxr[j] = from_compute<T>(to_compute(yr[j]) * (to_compute(dyr[j]) - dot));
}

// log-softmax: y = (x - max) - log(sum(exp(x - max)))
template <class T>
__global__ void log_softmax_forward_kernel(const T* x, T* y, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
  const T* xr = x + row;
  T* yr = y + row;
  const LogSumExp lse = row_logsumexp(xr, cols);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    yr[j] = from_compute<T>((to_compute(xr[j]) - lse.max) - lse.log_sum);
}

// log-softmax backward: dx = dy - softmax(x) * sum(dy), with softmax(x) = exp(y)
template <class T>
__global__ void log_softmax_backward_kernel(const T* y, const T* dy, T* dx, int64_t cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * cols;
  const T *yr = y + row, *dyr = dy + row;
  T* dxr = dx + row;
  float s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += to_compute(dyr[j]);
  s = block_reduce(s, Sum{});
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dxr[j] = from_compute<T>(to_compute(dyr[j]) - expf(to_compute(yr[j])) * s);
}

// cross-entropy: lse[r] = logsumexp(x[r]); losses[r] = lse[r] - x[r, t_r], 0 for ignored rows,
// NaN for a target outside [0, cols) (check_targets has raised the flag for it). Logits of type T;
// losses and lse are f32 whatever T is.
template <class T>
__global__ void cross_entropy_forward_kernel(const T* logits, const int32_t* targets, float* losses,
                                             float* lse, int64_t cols, int64_t ignore_index) {
  const int64_t r = blockIdx.x;
  const T* xr = logits + r * cols;
  const LogSumExp l = row_logsumexp(xr, cols);
  if (threadIdx.x == 0) {
    const int32_t t = targets[r];
    lse[r] = l.max + l.log_sum;
    const bool in_range = t >= 0 && t < cols;
    losses[r] = t == ignore_index ? 0.0f : in_range ? l.log_sum - (to_compute(xr[t]) - l.max) : NAN;
  }
}

// cross-entropy backward: dx[r, j] = (exp(x[r, j] - lse[r]) - [j == t_r]) * dlosses[r]; ignored
// rows (and bad ones, flagged by check_targets) get 0. lse and dlosses are f32; logits and dlogits
// of type T.
template <class T>
__global__ void cross_entropy_backward_kernel(const T* logits, const int32_t* targets,
                                              const float* lse, const float* dlosses, T* dlogits,
                                              int64_t cols, int64_t ignore_index) {
  const int64_t r = blockIdx.x;
  const T* xr = logits + r * cols;
  T* dxr = dlogits + r * cols;
  const int64_t t = targets[r];
  const float scale = t == ignore_index || t < 0 || t >= cols ? 0.0f : dlosses[r];
  const float l = lse[r];
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    dxr[j] = from_compute<T>(expf(to_compute(xr[j]) - l) * scale - (j == t ? scale : 0.0f));
}

// ---------------------------------------------------------------------------------------------
// Host side.

// One block per row; threads: the row's width rounded up to whole warps, at most 512.
LaunchInfo row_launch_info(const char* kernel, const Tensor& x, const Rows& g, double flops,
                           double bytes) {
  const dim3 block(whole_warps(g.cols, kMaxThreadsPerRow));
  return kernel_launch_info(kernel, x, dim3(static_cast<unsigned>(g.rows)), block, 0, flops, bytes);
}

// The four row-wise kernels: kernel<T>(inputs..., out, cols) with one block per row, after
// checking that inputs and output are contiguous, of the first input's size and dtype (f32 or
// bf16: T).
// kernel_of(T{}) is the kernel for element type T (T as a parameter: a lambda with a template
// parameter only it would not use draws nvcc's warning 445 on its conversion to a function
// pointer).
template <class KernelOf, class... In>
void launch_rowwise(const char* kernel, KernelOf kernel_of, double flops_per_element,
                    const Tensor& out, const In&... in) {
  const Tensor* inputs[] = {&in...};
  const Tensor& x = *inputs[0];  // x, or y for the backward kernels: sets the size and dtype
  check_row_layout(kernel, x.numel(), {&in..., &out}, x.dtype());
  const Rows g(x);
  if (g.rows == 0) return;
  const LaunchCost cost =
      rowwise_cost(flops_per_element, static_cast<double>(out.numel()), {&in..., &out});
  const LaunchInfo info = row_launch_info(kernel, out, g, cost.flops, cost.bytes);
  visit_f32_bf16(x, kernel, [&]<class T>() {
    launch_cuda_kernel(info, kernel_of(T{}), in.template data<T>()..., out.data<T>(), g.cols);
  });
}

}  // namespace

void softmax_forward(const Tensor& x, const Tensor& y) {
  launch_rowwise(
      "softmax_forward", []<class T>(T) { return softmax_forward_kernel<T>; }, kSoftmaxForwardFlops,
      y, x);
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  launch_rowwise(
      "softmax_backward", []<class T>(T) { return softmax_backward_kernel<T>; },
      kSoftmaxBackwardFlops, dx, y, dy);
}

void log_softmax_forward(const Tensor& x, const Tensor& y) {
  launch_rowwise(
      "log_softmax_forward", []<class T>(T) { return log_softmax_forward_kernel<T>; },
      kSoftmaxForwardFlops, y, x);
}

void log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  launch_rowwise(
      "log_softmax_backward", []<class T>(T) { return log_softmax_backward_kernel<T>; },
      kSoftmaxBackwardFlops, dx, y, dy);
}

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, const Tensor& losses,
                           const Tensor& lse, const Tensor& valid, int64_t ignore_index) {
  const char* kernel = "cross_entropy_forward";
  const Rows g(logits);
  check_row_layout(kernel, logits.numel(), {&logits}, logits.dtype());
  check_row_layout(kernel, g.rows, {&targets}, DType::i32);
  check_row_layout(kernel, g.rows, {&losses, &lse}, DType::f32);  // f32 whatever the logits are
  check_row_layout(kernel, 1, {&valid}, DType::f32);
  // 1. check the targets and count the valid rows
  check_targets(kernel, targets, g.cols, ignore_index, valid.data<float>());
  if (g.rows == 0) return;
  // 2. one block per row: logsumexp and the loss
  const LaunchCost cost = cross_entropy_forward_cost(logits, targets, losses, lse);
  const LaunchInfo info = row_launch_info(kernel, logits, g, cost.flops, cost.bytes);
  visit_f32_bf16(logits, kernel, [&]<class T>() {
    launch_cuda_kernel(info, cross_entropy_forward_kernel<T>, logits.data<T>(),
                       targets.data<int32_t>(), losses.data<float>(), lse.data<float>(), g.cols,
                       ignore_index);
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& dlosses, const Tensor& dlogits, int64_t ignore_index) {
  const char* kernel = "cross_entropy_backward";
  const Rows g(logits);
  check_row_layout(kernel, logits.numel(), {&logits, &dlogits}, logits.dtype());
  check_row_layout(kernel, g.rows, {&targets}, DType::i32);
  check_row_layout(kernel, g.rows, {&lse, &dlosses}, DType::f32);
  check_targets(kernel, targets, g.cols, ignore_index, nullptr);
  if (g.rows == 0) return;
  const LaunchCost cost = cross_entropy_backward_cost(logits, targets, lse, dlosses, dlogits);
  const LaunchInfo info = row_launch_info(kernel, logits, g, cost.flops, cost.bytes);
  visit_f32_bf16(logits, kernel, [&]<class T>() {
    launch_cuda_kernel(info, cross_entropy_backward_kernel<T>, logits.data<T>(),
                       targets.data<int32_t>(), lse.data<float>(), dlosses.data<float>(),
                       dlogits.data<T>(), g.cols, ignore_index);
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
