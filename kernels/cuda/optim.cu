// cuda optimizer steps, in place: a fused multi-tensor AdamW (one launch updates up to
// kMaxTensorsPerLaunch parameters, kernels/cuda/multi_tensor.h, and writes their bf16 working
// copies) and SGD with momentum (one pass per parameter). Contracts in kernels/kernel_list.inc. The
// per-element arithmetic is the cpu reference's own (kernels/optim_math.h: PyTorch's formulas,
// scalars formed in double on the host and used in f32), so both devices compute the same floats.
//
// Thread mapping: a grid-stride loop. Thread t of a tensor's blocks takes units t, t + T,
// t + 2T, ... (T = the threads of those blocks); AdamW's unit is a float4 of each array when all
// four are 16-byte aligned (kernels/cuda/vector_row.h; the last may be a scalar tail), else one
// float. A warp touches consecutive floats of each array (coalesced) and any n, tail included, is
// covered by a grid of bounded size.
// Every element is independent: no sharing, no atomics.
#include <algorithm>
#include <cmath>

#include "kernels/costs/optim.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/multi_tensor.h"
#include "kernels/cuda/vector_row.h"
#include "kernels/optim_math.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;
// Enough blocks to fill any current GPU several times over; larger tensors loop.
constexpr unsigned kMaxBlocks = 1024;

// A grid-stride launch over one parameter's elements.
LaunchInfo grid_stride_info(const char* kernel, const Tensor& param, LaunchCost cost) {
  return kernel_launch_info(kernel, param,
                            dim3(multi_tensor_blocks(param.numel(), kThreads, 1, kMaxBlocks)),
                            dim3(kThreads), 0, cost.flops, cost.bytes);
}

// The parameters of one multi-tensor AdamW launch: entry y is updated by the blocks of row y.
struct AdamWTensorList {
  float* p[kMaxTensorsPerLaunch];
  const float* g[kMaxTensorsPerLaunch];
  float* m[kMaxTensorsPerLaunch];
  float* v[kMaxTensorsPerLaunch];
  bf16* copy[kMaxTensorsPerLaunch];  // the parameter's bf16 working copy, or null
  int64_t n[kMaxTensorsPerLaunch];
  bool vectorised[kMaxTensorsPerLaunch];  // p, g, m and v all 16-byte aligned: float4 units
};

// `table`: the step's scalars in device memory (kernels/optim_math.h: adamw_scalar_table), read
// at run time, so that a captured launch replays with each step's learning rate and bias
// corrections; `decay` points to the decay factors (1 - lr wd) of this launch's parameters.
// `finite`: the finite gate (null: none); 0 there leaves the parameters and moments untouched.
// A parameter with a bf16 copy has the copy written from the parameter's new value in the same
// pass, as llm.c's AdamW writes its bf16 weights: 2 bytes more per element instead of a cast
// that reads the 4 again. The copy is stored element by element (any alignment): a warp's
// stores still cover whole contiguous 32-byte sectors, so DRAM sees the same bytes.
__global__ void adamw_step_kernel(AdamWTensorList list, const float* table, const float* decays,
                                  const double* finite) {
  const bool update = finite == nullptr || *finite != 0.0;
  const unsigned t = blockIdx.y;
  float* p = list.p[t];
  const float* g = list.g[t];
  float* m = list.m[t];
  float* v = list.v[t];
  bf16* copy = list.copy[t];
  if (!update && copy == nullptr) return;
  const int64_t n = list.n[t];
  const bool vectorised = list.vectorised[t];
  const AdamWScalars s = *reinterpret_cast<const AdamWScalars*>(table);
  const float decay = decays[t];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t units = vec_units<float>(n, vectorised);
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
       u += stride)
    visit_unit<float>(
        vectorised, u, n,
        [&](int64_t i) {
          Vec<float> pv = load_vec(p + i);
          if (update) {
            Vec<float> mv = load_vec(m + i), vv = load_vec(v + i);
            const Vec<float> gv = load_vec(g + i);
            for (int k = 0; k < kVecWidth<float>; ++k)
              adamw_update(pv.v[k], gv.v[k], mv.v[k], vv.v[k], decay, s);
            store_vec(p + i, pv);
            store_vec(m + i, mv);
            store_vec(v + i, vv);
          }
          if (copy != nullptr)
            for (int k = 0; k < kVecWidth<float>; ++k) copy[i + k] = from_compute<bf16>(pv.v[k]);
        },
        [&](int64_t i) {
          if (update) adamw_update(p[i], g[i], m[i], v[i], decay, s);
          if (copy != nullptr) copy[i] = from_compute<bf16>(p[i]);
        });
}

// buf == nullptr: plain SGD (no momentum, no buffer).
__global__ void sgd_step_kernel(float* p, const float* g, float* buf, int64_t n, float lr,
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

// x *= clip_factor(sum_sq[0], max_norm), in the stored type's compute precision.
template <class T>
__global__ void clip_scale_kernel(T* x, int64_t n, const double* sum_sq, double max_norm) {
  const double factor = clip_factor(*sum_sq, max_norm);
  if (factor == 1.0) return;  // the norm is within bounds: nothing changes
  const auto f = static_cast<compute_t<T>>(factor);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = from_compute<T>(to_compute(x[i]) * f);
}

void adamw_step(std::span<const AdamWParam> params, const AdamWHyper& hyper) {
  check_adamw_step(params, hyper);
  // The step's scalars in device memory: the caller's (staged before a graph replay), or uploaded
  // now (not inside a graph capture: the upload refuses).
  const Tensor table = hyper.scalars.defined() ? hyper.scalars : [&] {
    const std::vector<float> host = adamw_scalar_table(params, hyper);
    return Tensor::from_host(host.data(), {static_cast<int64_t>(host.size())}, DType::f32,
                             params[0].param.device());
  }();
  check_adamw_scalars(params, table);
  for_each_launch(
      params.size(), [](size_t, size_t) { return true; },
      [&](size_t first, size_t count) {
        AdamWTensorList list{};
        int64_t largest = 0, n = 0, n_copied = 0;
        for (size_t k = 0; k < count; ++k) {
          const AdamWParam& a = params[first + k];
          list.p[k] = a.param.data<float>();
          list.g[k] = a.grad.data<float>();
          list.m[k] = a.m.data<float>();
          list.v[k] = a.v.data<float>();
          list.copy[k] = a.copy.defined() ? a.copy.data<bf16>() : nullptr;
          list.n[k] = a.param.numel();
          if (a.copy.defined()) n_copied += list.n[k];
          list.vectorised[k] = all_vec_aligned(list.p[k], list.g[k], list.m[k], list.v[k]);
          largest = std::max(largest, vec_units<float>(list.n[k], list.vectorised[k]));
          n += list.n[k];
        }
        if (n == 0) return;
        // Reads p, g, m, v; writes p, m, v and the bf16 copies.
        const dim3 grid(multi_tensor_blocks(largest, kThreads, 1, kMaxBlocks),
                        static_cast<unsigned>(count));
        const LaunchCost cost = adamw_step_cost(n, n_copied);
        launch_cuda_kernel(kernel_launch_info("adamw_step", params[first].param, grid,
                                              dim3(kThreads), 0, cost.flops, cost.bytes),
                           adamw_step_kernel, list, table.data<float>(),
                           table.data<float>() + kAdamWScalarFloats + first,
                           hyper.finite.defined() ? hyper.finite.data<double>() : nullptr);
      });
}

void clip_scale(const Tensor& x, const Tensor& sum_sq, double max_norm) {
  check_clip_scale(x, sum_sq);
  const int64_t n = x.numel();
  if (n == 0) return;
  visit_element(x, "clip_scale", [&]<class T>() {
    // Counted: what it must do, read the one sum; whether it scales x is decided on the device,
    // after the launch (kernels/costs/optim.h).
    launch_cuda_kernel(grid_stride_info("clip_scale", x, clip_scale_cost(x, false)),
                       clip_scale_kernel<T>, x.data<T>(), n, sum_sq.data<double>(), max_norm);
  });
}

// One thread: the loss (widened to double) and the norm, and whether both are finite.
template <class T>
__global__ void step_status_kernel(const T* loss, const double* sum_sq, double* status) {
  step_status_of(static_cast<double>(to_compute(loss[0])), sum_sq[0], status);
}

void step_status(const Tensor& loss, const Tensor& sum_sq, const Tensor& status) {
  check_step_status(loss, sum_sq, status);
  visit_element(loss, "step_status", [&]<class T>() {
    const LaunchCost cost = step_status_cost(loss);
    launch_cuda_kernel(
        kernel_launch_info("step_status", status, dim3(1), dim3(1), 0, cost.flops, cost.bytes),
        step_status_kernel<T>, loss.data<T>(), sum_sq.data<double>(), status.data<double>());
  });
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
              double momentum, double weight_decay, bool first_step) {
  check_sgd_step(param, grad, buf, momentum);
  const bool use_buf = buf.defined();
  const int64_t n = param.numel();
  if (n == 0) return;
  // Reads p, g (and buf); writes p (and buf).
  launch_cuda_kernel(grid_stride_info("sgd_step", param, sgd_step_cost(param, use_buf)),
                     sgd_step_kernel, param.data<float>(), grad.data<float>(),
                     use_buf ? buf.data<float>() : nullptr, n, static_cast<float>(lr),
                     static_cast<float>(momentum), static_cast<float>(weight_decay), first_step);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
