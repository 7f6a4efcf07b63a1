// cpu optimizer steps: AdamW and SGD with momentum, one fused pass over each parameter, in place.
//
// The arithmetic follows PyTorch's single-tensor implementations step by step (scalars computed
// in double, then used in f32), so weights track a PyTorch run to rounding. Every element is
// independent: the loops are plain, branch-free and vectorise.
#include <cmath>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// Optimizer state must be f32, contiguous and shaped like the parameter.
void check_state(const char* kernel, const Tensor& param, std::initializer_list<Tensor> state) {
  GLASS_CHECK(param.dtype() == DType::f32 && param.is_contiguous(),
              "{}: parameter {} must be contiguous f32", kernel, param.describe());
  for (const Tensor& t : state)
    GLASS_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == param.shape(),
                "{}: state {} must be contiguous f32 shaped like the parameter {}", kernel,
                t.describe(), param.describe());
}

}  // namespace

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                double lr, double beta1, double beta2, double eps, double weight_decay,
                int64_t step) {
  check_state("adamw_step", param, {grad, m, v});
  GLASS_CHECK(step >= 1, "adamw_step: step {} must count from 1 for {}", step, param.describe());
  const int64_t n = param.numel();
  // Reads p, g, m, v; writes p, m, v.
  launch(cpu_launch_info("adamw_step", n, 16.0 * n, 7.0 * param.nbytes()), [&] {
    // Scalars, as PyTorch forms them: decay factor, bias corrections and the step size.
    const float decay = static_cast<float>(1.0 - lr * weight_decay);
    const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
    const float one_minus_b1 = static_cast<float>(1.0 - beta1);
    const float one_minus_b2 = static_cast<float>(1.0 - beta2);
    const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    const float step_size = static_cast<float>(lr / bias_correction1);
    const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    const float epsilon = static_cast<float>(eps);
    float* p = param.data<float>();
    const float* g = grad.data<float>();
    float* mp = m.data<float>();
    float* vp = v.data<float>();
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      // Decoupled weight decay: p -= lr wd p.
      const float pi = p[i] * decay;
      // First and second moments: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2.
      const float mi = b1 * mp[i] + one_minus_b1 * g[i];
      const float vi = b2 * vp[i] + one_minus_b2 * g[i] * g[i];
      // p -= lr/(1-b1^t) m / (sqrt(v)/sqrt(1-b2^t) + eps).
      const float denom = std::sqrt(vi) / bias_correction2_sqrt + epsilon;
      p[i] = pi - step_size * mi / denom;
      mp[i] = mi;
      vp[i] = vi;
    }
  });
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
  launch(cpu_launch_info("sgd_step", n, 5.0 * n, (use_buf ? 5.0 : 3.0) * param.nbytes()), [&] {
    const float wd = static_cast<float>(weight_decay), lr_f = static_cast<float>(lr);
    const float mom = static_cast<float>(momentum);
    float* p = param.data<float>();
    const float* g = grad.data<float>();
    float* b = use_buf ? buf.data<float>() : nullptr;
    if (!use_buf) {
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
      for (int64_t i = 0; i < n; ++i) p[i] -= lr_f * (g[i] + wd * p[i]);
      return;
    }
#pragma omp parallel for simd schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      // Weight decay folded into the gradient: g += wd p.
      const float gi = g[i] + wd * p[i];
      // buf = momentum buf + g; on the first step buf = g (the old buffer's content is unused).
      const float bi = first_step ? gi : mom * b[i] + gi;
      b[i] = bi;
      p[i] -= lr_f * bi;
    }
  });
}

}  // namespace glass::kernels::cpu
