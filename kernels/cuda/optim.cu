// cuda optimizer steps: AdamW and SGD with momentum, one pass over each parameter, in place.
// Contracts in kernels/backend.h; the cpu reference is kernels/cpu/optim.cpp, whose arithmetic
// (PyTorch's single-tensor formulas, scalars formed in double on the host and used in f32) this
// follows step by step.
//
// Thread mapping: a grid-stride loop. Thread t of the grid takes elements t, t + T, t + 2T, ...
// (T = all threads of the grid), so a warp touches 32 consecutive floats of each array at a time
// (coalesced) and any n, tail included, is covered by a grid of bounded size. Every element is
// independent: no sharing, no atomics. A fused multi-tensor AdamW (one launch for all parameters)
// is a later optimisation.
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; larger tensors loop.
constexpr int64_t kMaxBlocks = 1024;

// Optimizer state must be f32, contiguous, shaped like the parameter and on its device.
void check_state(const char* kernel, const Tensor& param, std::initializer_list<Tensor> state) {
  GLASS_CHECK(param.dtype() == DType::f32 && param.is_contiguous(),
              "{}: parameter {} must be contiguous f32", kernel, param.describe());
  for (const Tensor& t : state)
    GLASS_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == param.shape() &&
                    t.device() == param.device(),
                "{}: state {} must be contiguous f32 shaped like the parameter {}, on its device",
                kernel, t.describe(), param.describe());
}

// A grid-stride launch over the parameter's elements.
LaunchInfo grid_stride_info(const char* kernel, const Tensor& param, double flops, double bytes) {
  LaunchInfo info;
  info.kernel = kernel;
  info.device = param.device();
  info.grid = {
      static_cast<unsigned>(std::min<int64_t>(ceil_div(param.numel(), kThreads), kMaxBlocks)), 1,
      1};
  info.block = {kThreads, 1, 1};
  info.flops = flops;
  info.bytes = bytes;
  return info;
}

// The step's scalars, as PyTorch forms them.
struct AdamWScalars {
  float decay;         // 1 - lr wd
  float beta1, beta2;  // moment decay rates
  float one_minus_beta1, one_minus_beta2;
  float step_size;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
};

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n,
                             AdamWScalars s) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    // Decoupled weight decay: p -= lr wd p.
    const float pi = p[i] * s.decay;
    // First and second moments: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2.
    const float gi = g[i];
    const float mi = s.beta1 * m[i] + s.one_minus_beta1 * gi;
    const float vi = s.beta2 * v[i] + s.one_minus_beta2 * gi * gi;
    // p -= lr/(1-b1^t) m / (sqrt(v)/sqrt(1-b2^t) + eps).
    const float denom = sqrtf(vi) / s.bias_correction2_sqrt + s.eps;
    p[i] = pi - s.step_size * mi / denom;
    m[i] = mi;
    v[i] = vi;
  }
}

// buf == nullptr: plain SGD (no momentum, no buffer).
__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, float lr,
                           float momentum, float weight_decay, bool first_step) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    // Weight decay folded into the gradient: g += wd p.
    const float gi = g[i] + weight_decay * p[i];
    float update = gi;
    if (buf != nullptr) {
      // buf = momentum buf + g; on the first step buf = g (the old buffer is not read).
      update = first_step ? gi : momentum * buf[i] + gi;
      buf[i] = update;
    }
    p[i] -= lr * update;
  }
}

}  // namespace

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                int64_t step) {
  check_state("adamw_step", param, {grad, m, v});
  GLASS_CHECK(step >= 1, "adamw_step: step {} must count from 1 for {}", step, param.describe());
  const int64_t n = param.numel();
  if (n == 0) return;
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  const AdamWScalars s{static_cast<float>(1.0 - lr * weight_decay),
                       static_cast<float>(beta1),
                       static_cast<float>(beta2),
                       static_cast<float>(1.0 - beta1),
                       static_cast<float>(1.0 - beta2),
                       static_cast<float>(lr / bias_correction1),
                       static_cast<float>(std::sqrt(bias_correction2)),
                       static_cast<float>(eps)};
  // Reads p, g, m, v; writes p, m, v.
  launch_cuda_kernel(grid_stride_info("adamw_step", param, 16.0 * n, 7.0 * param.nbytes()),
                     adamw_kernel, param.data<float>(), grad.data<float>(), m.data<float>(),
                     v.data<float>(), n, s);
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
              double momentum, double weight_decay, bool first_step) {
  // Without momentum there is no buffer to keep: buf may be undefined.
  const bool use_buf = buf.defined();
  GLASS_CHECK(use_buf || momentum == 0, "sgd_step: momentum {} needs a buffer for {}", momentum,
              param.describe());
  if (use_buf)
    check_state("sgd_step", param, {grad, buf});
  else
    check_state("sgd_step", param, {grad});
  const int64_t n = param.numel();
  if (n == 0) return;
  // Reads p, g (and buf); writes p (and buf).
  launch_cuda_kernel(
      grid_stride_info("sgd_step", param, 5.0 * n, (use_buf ? 5.0 : 3.0) * param.nbytes()),
      sgd_kernel, param.data<float>(), grad.data<float>(), use_buf ? buf.data<float>() : nullptr, n,
      static_cast<float>(lr), static_cast<float>(momentum), static_cast<float>(weight_decay),
      first_step);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
