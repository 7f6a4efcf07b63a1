// cpu optimizer steps, in place: AdamW (all parameters in one launch) and SGD with momentum (one
// fused pass per parameter).
//
// The arithmetic follows PyTorch's single-tensor implementations step by step (scalars computed
// in double, then used in f32; kernels/optim_math.h, shared with the CUDA kernels), so weights
// track a PyTorch run to rounding. Every element is independent: the loops are plain,
// branch-free and vectorise.
#include <cmath>

#include "kernels/costs/optim.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/optim_math.h"

namespace glass::kernels::cpu {

void adamw_step(std::span<const AdamWParam> params, const AdamWHyper& hyper) {
  check_adamw_step(params, hyper);
  int64_t n = 0, n_copied = 0;
  for (const AdamWParam& a : params) {
    n += a.param.numel();
    if (a.copy.defined()) n_copied += a.param.numel();
  }
  // One launch for all parameters; each parameter's loop is split over the threads. Reads p, g,
  // m, v; writes p, m, v, and the bf16 copy where there is one.
  const LaunchCost cost = adamw_step_cost(n, n_copied);
  launch(cpu_launch_info("adamw_step", n, cost.flops, cost.bytes), [&] {
    // The finite gate: a step with a non-finite loss or norm changes no parameter or moment (the
    // copies are still written: the unchanged parameters, rounded).
    const bool update = !hyper.finite.defined() || hyper.finite.data<double>()[0] != 0.0;
    const AdamWScalars s = adamw_scalars(hyper);
    for (const AdamWParam& a : params) {
      const float decay = adamw_decay(hyper, a.weight_decay);
      const int64_t count = a.param.numel();
      float* p = a.param.data<float>();
      const float* g = a.grad.data<float>();
      float* m = a.m.data<float>();
      float* v = a.v.data<float>();
      bf16* copy = a.copy.defined() ? a.copy.data<bf16>() : nullptr;
      parallel_ranges(
          count, count >= kParallelGrain,
          [&](int64_t begin, int64_t end) {
            if (update) {
#pragma omp simd
              for (int64_t i = begin; i < end; ++i) adamw_update(p[i], g[i], m[i], v[i], decay, s);
            }
            // the cast's rounding (kernels/cpu/memory.cpp: cast), of the value just written
            if (copy != nullptr)
              for (int64_t i = begin; i < end; ++i) copy[i] = bf16::from_float(p[i]);
          },
          kRowLanes);
    }
  });
}

void clip_scale(const Tensor& x, const Tensor& sum_sq, double max_norm) {
  check_clip_scale(x, sum_sq);
  const int64_t n = x.numel();
  // On cpu the sum is in host memory, written by the launch before this one, so the factor is
  // known here and the launch counts what it does: read the sum, then read and write x only when
  // it scales (a norm within bounds changes nothing).
  const double factor = clip_factor(sum_sq.data<double>()[0], max_norm);
  const bool scales = factor != 1.0;
  const LaunchCost cost = clip_scale_cost(x, scales);
  launch(cpu_launch_info("clip_scale", n, cost.flops, cost.bytes), [&] {
    if (!scales) return;
    visit_element(x, "clip_scale", [&]<class T>() {
      const compute_t<T> f = static_cast<compute_t<T>>(factor);
      T* p = x.data<T>();
      parallel_ranges(
          n, n >= kParallelGrain,
          [&](int64_t begin, int64_t end) {
#pragma omp simd
            for (int64_t i = begin; i < end; ++i) p[i] = from_compute<T>(to_compute(p[i]) * f);
          },
          kRowLanes);
    });
  });
}

void step_status(const Tensor& loss, const Tensor& sum_sq, const Tensor& status) {
  check_step_status(loss, sum_sq, status);
  const LaunchCost cost = step_status_cost(loss);
  launch(cpu_launch_info("step_status", 1, cost.flops, cost.bytes), [&] {
    visit_element(loss, "step_status", [&]<class T>() {
      step_status_of(static_cast<double>(to_compute(loss.data<T>()[0])), sum_sq.data<double>()[0],
                     status.data<double>());
    });
  });
}

void sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
              double momentum, double weight_decay, bool first_step) {
  check_sgd_step(param, grad, buf, momentum);
  const bool use_buf = buf.defined();
  const int64_t n = param.numel();
  const LaunchCost cost = sgd_step_cost(param, use_buf);
  launch(cpu_launch_info("sgd_step", n, cost.flops, cost.bytes), [&] {
    const float wd = static_cast<float>(weight_decay), lr_f = static_cast<float>(lr);
    const float mom = static_cast<float>(momentum);
    float* p = param.data<float>();
    const float* g = grad.data<float>();
    float* b = use_buf ? buf.data<float>() : nullptr;
    if (!use_buf) {
      parallel_ranges(
          n, n >= kParallelGrain,
          [&](int64_t begin, int64_t end) {
#pragma omp simd
            for (int64_t i = begin; i < end; ++i) p[i] -= lr_f * (g[i] + wd * p[i]);
          },
          kRowLanes);
      return;
    }
    parallel_ranges(
        n, n >= kParallelGrain,
        [&](int64_t begin, int64_t end) {
#pragma omp simd
          for (int64_t i = begin; i < end; ++i) {
            // Weight decay folded into the gradient: g += wd p.
            const float gi = g[i] + wd * p[i];
            // buf = momentum buf + g; on the first step buf = g (the old buffer's content is
            // unused).
            const float bi = first_step ? gi : mom * b[i] + gi;
            b[i] = bi;
            p[i] -= lr_f * bi;
          }
        },
        kRowLanes);
  });
}

}  // namespace glass::kernels::cpu
