// The fused classifier: cross-entropy's forward and the gradient of its logits in one kernel per
// row (contract in kernels/kernel_list.inc; the cpu reference is kernels/cpu/classifier.cpp). And
// the target check that every cross-entropy kernel runs first (cuda_kernels.h: check_targets).
//
// Why fused: the logits of a language model are the largest tensor of a step (GPT-2: 8192 rows x
// 50304 columns, 1.6 GB in f32). The unfused path reads them three times (logsumexp, loss,
// backward) and writes a second tensor of the same size for their gradient. Here a block reads
// its row once for the maximum and the sum of exponentials (online: when a thread meets a larger
// value it rescales its running sum), and a second time, from cache, to overwrite the row with
// the gradient of the mean loss, (softmax - onehot(target)) / valid. Backward then only scales
// that gradient by the incoming one (autograd/classifier.cpp). Both passes move the row in 16-byte
// vectors where its alignment allows (kernels/cuda/vector_row.h).
//
// The vocabulary may be padded (GPT-2: 50257 classes in 50304 columns, a multiple of 64, so rows
// stay aligned for vectorised loads and GEMM tiles): columns from `vocab` on are never a target,
// take no part in the max and the sum, and get gradient 0.
//
// Logits of type T: f32, or bf16 for mixed precision, where the losses and the count of valid rows
// stay f32 (accum_dtype), the max, sums and exps are f32, and the gradient is rounded to bf16 once,
// when it overwrites the row.
//
// Targets are checked on the device: a target outside [0, vocab) that is not ignore_index raises a
// device error flag (kernels/cuda/common.h), read with the next host read; its row's loss is NaN
// and its gradient 0, and nothing is read out of bounds.
#include <algorithm>
#include <cmath>

#include "kernels/costs/classifier.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/vector_row.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kMaxThreadsPerRow = 1024;

// One block over all rows: valid[0] (when given) = the number of rows whose target is in
// [0, vocab); a target outside it that is not ignore_index raises the flag with its row.
__global__ void check_targets_kernel(const int32_t* targets, int64_t rows, int64_t vocab,
                                     int64_t ignore_index, int* bad_target, float* valid) {
  long long count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int64_t t = targets[r];
    if (t == ignore_index) continue;
    if (t >= 0 && t < vocab)
      ++count;
    else
      raise_flag(bad_target, r);
  }
  count = block_reduce(count, Sum{});
  if (threadIdx.x == 0 && valid) valid[0] = static_cast<float>(count);
}

// One block per row r of logits [rows, cols], classes in columns [0, vocab).
template <class T>
__global__ void fused_classifier_kernel(T* logits, const int32_t* targets, float* losses,
                                        const float* valid, int64_t cols, int64_t vocab,
                                        int64_t ignore_index, bool write_dlogits) {
  T* x = logits + static_cast<int64_t>(blockIdx.x) * cols;
  const int64_t t = targets[blockIdx.x];
  const bool counted = t != ignore_index, in_range = t >= 0 && t < vocab;
  // The target's logit, read by every thread before any thread overwrites the row.
  const float x_target = in_range ? to_compute(x[t]) : 0.0f;
  // 1. each thread's running max m and sum s = sum exp(x - m) over its columns, in one read
  //    (16-byte vectors where the row allows, vector_row.h)
  float m = -INFINITY, s = 0.0f;
  for_each_column(x, split_row(vocab, x), vocab, [&](int64_t, T xj) {
    const float v = to_compute(xj);
    if (v > m) {
      s = s * expf(m - v) + 1.0f;  // rescale the sum to the new max (exp(-inf) = 0 at first)
      m = v;
    } else {
      s += expf(v - m);
    }
  });
  // 2. the row's max, and the threads' sums rescaled to it
  const float row_max = block_reduce(m, Max{});
  const float sum = block_reduce(s == 0.0f ? 0.0f : s * expf(m - row_max), Sum{});
  const float log_sum = logf(sum);
  // 3. loss = logsumexp - x[t] = log(sum) - (x[t] - max); 0 for ignored rows, NaN for bad ones
  if (threadIdx.x == 0)
    losses[blockIdx.x] = !counted ? 0.0f : in_range ? log_sum - (x_target - row_max) : NAN;
  if (!write_dlogits) return;
  // 4. the row becomes d(mean loss)/d(logits) = (softmax - onehot(t)) / valid; padded columns,
  //    ignored and bad rows get 0
  const float scale = counted && in_range ? 1.0f / valid[0] : 0.0f;
  const float inv_sum = 1.0f / sum;
  map_row(x, x, split_row(cols, x), cols, [&](int64_t j, T xj) {
    float g = 0.0f;
    if (j < vocab) g = (expf(to_compute(xj) - row_max) * inv_sum - (j == t ? 1.0f : 0.0f)) * scale;
    return from_compute<T>(g);
  });
}

}  // namespace

void check_targets(const char* kernel, const Tensor& targets, int64_t vocab, int64_t ignore_index,
                   float* valid) {
  const int64_t rows = targets.numel();
  const Tensor bad = deferred_flag(targets, [kernel, targets, vocab, ignore_index](int64_t row) {
    return fmt::format("{}: target {} at row {} is outside [0, {}) and is not ignore_index ({})",
                       kernel, read_i32_at(targets, row), row, vocab, ignore_index);
  });
  const LaunchInfo info =
      kernel_launch_info("check_targets", targets, dim3(1), dim3(whole_warps(rows, 1024)), 0, 0,
                         static_cast<double>(targets.nbytes()) + (valid ? 4.0 : 0.0));
  launch_cuda_kernel(info, check_targets_kernel, targets.data<int32_t>(), rows, vocab, ignore_index,
                     bad.data<int32_t>(), valid);
}

void fused_classifier(const Tensor& logits, const Tensor& targets, const Tensor& losses,
                      const Tensor& valid, int64_t vocab, int64_t ignore_index,
                      bool write_dlogits) {
  const char* kernel = "fused_classifier";
  const ClassifierShape g(kernel, logits, targets, losses, valid, vocab);
  GLASS_CHECK(logits.dtype() == DType::f32 || logits.dtype() == DType::bf16,
              "{}: logits {} are {}; the kernel takes f32 or bf16", kernel, logits.describe(),
              dtype_name(logits.dtype()));
  // 1. check the targets and count the rows that count (the row kernel divides by it)
  check_targets(kernel, targets, vocab, ignore_index, valid.data<float>());
  if (g.rows == 0) return;
  // 2. one block per row: max, sum, loss and (in place) the gradient
  const dim3 block(whole_warps(g.cols, kMaxThreadsPerRow));
  // the row is read twice (the second time typically from L2) and written once; counted once
  const LaunchCost cost = fused_classifier_cost(logits, targets, losses, write_dlogits);
  const LaunchInfo info = kernel_launch_info(kernel, logits, dim3(static_cast<unsigned>(g.rows)),
                                             block, 0, cost.flops, cost.bytes);
  visit_f32_bf16(logits, kernel, [&]<class T>() {
    launch_cuda_kernel(info, fused_classifier_kernel<T>, logits.data<T>(), targets.data<int32_t>(),
                       losses.data<float>(), valid.data<float>(), g.cols, vocab, ignore_index,
                       write_dlogits);
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
