// The optimizers' arithmetic and argument checks, shared by the cpu loops (kernels/cpu/optim.cpp)
// and the CUDA kernels (kernels/cuda/optim.cu), so both devices do the same f32 operations in the
// same order and reject the same bad input with the same message.
//
// AdamW follows PyTorch's single-tensor formulas: the step's scalars (bias corrections, step size)
// are formed in double on the host, then every element is updated in f32.
#pragma once

#include <cmath>
#include <initializer_list>
#include <span>
#include <vector>

#include "engine/error.h"
#include "engine/rng.h"  // GLASS_HD
#include "kernels/backend.h"

namespace glass::kernels {

// The scalars of one AdamW step that every parameter shares.
struct AdamWScalars {
  float beta1, beta2;  // moment decay rates
  float one_minus_beta1, one_minus_beta2;
  float step_size;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float eps;
};

inline AdamWScalars adamw_scalars(const AdamWHyper& h) {
  const double t = static_cast<double>(h.step);
  const double bias_correction1 = 1.0 - std::pow(h.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(h.beta2, t);
  return {static_cast<float>(h.beta1),
          static_cast<float>(h.beta2),
          static_cast<float>(1.0 - h.beta1),
          static_cast<float>(1.0 - h.beta2),
          static_cast<float>(h.lr / bias_correction1),
          static_cast<float>(std::sqrt(bias_correction2)),
          static_cast<float>(h.eps)};
}

// The decoupled weight-decay factor of one parameter: 1 - lr wd.
inline float adamw_decay(const AdamWHyper& h, double weight_decay) {
  return static_cast<float>(1.0 - h.lr * weight_decay);
}

// The step's scalars as the emu and cuda kernels read them from device memory (AdamWHyper::
// scalars): the AdamWScalars' 7 floats, then each parameter's decay factor, in params' order.
constexpr int64_t kAdamWScalarFloats = sizeof(AdamWScalars) / sizeof(float);
static_assert(sizeof(AdamWScalars) == 7 * sizeof(float), "AdamWScalars: 7 floats, no padding");
inline int64_t adamw_table_size(size_t params) {
  return kAdamWScalarFloats + static_cast<int64_t>(params);
}
inline std::vector<float> adamw_scalar_table(std::span<const AdamWParam> params,
                                             const AdamWHyper& h) {
  const AdamWScalars s = adamw_scalars(h);
  std::vector<float> table(reinterpret_cast<const float*>(&s),
                           reinterpret_cast<const float*>(&s) + kAdamWScalarFloats);
  for (const AdamWParam& a : params) table.push_back(adamw_decay(h, a.weight_decay));
  return table;
}

// Global-norm clipping's factor from the sum of squares of every gradient, in double:
// max_norm / (norm + 1e-6) when norm = sqrt(sum_squares) exceeds max_norm, else 1. A non-finite
// norm scales nothing: an infinite one would give the factor 0, zeroing the finite gradients and
// turning the infinity into a NaN, which hides where it came from (norm - norm is 0 exactly when
// the norm is finite).
GLASS_HD inline double clip_factor(double sum_squares, double max_norm) {
  const double norm = sqrt(sum_squares);
  return norm > max_norm && norm - norm == 0.0 ? max_norm / (norm + 1e-6) : 1.0;
}

// The step's status (Backend::step_status) from the loss and the gradients' sum of squares:
// {loss, norm, finite}. x - x is 0 exactly when x is finite (NaN and +-inf give NaN).
GLASS_HD inline void step_status_of(double loss, double sum_squares, double* status) {
  const double norm = sqrt(sum_squares);
  status[0] = loss;
  status[1] = norm;
  status[2] = (loss - loss == 0.0 && norm - norm == 0.0) ? 1.0 : 0.0;
}

// One element of one AdamW step, in place.
GLASS_HD inline void adamw_update(float& p, float g, float& m, float& v, float decay,
                                  const AdamWScalars& s) {
  // Decoupled weight decay: p -= lr wd p.
  const float decayed = p * decay;
  // First and second moments: m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2.
  const float mi = s.beta1 * m + s.one_minus_beta1 * g;
  const float vi = s.beta2 * v + s.one_minus_beta2 * g * g;
  // p -= lr/(1-b1^t) m / (sqrt(v)/sqrt(1-b2^t) + eps).
  const float denom = sqrtf(vi) / s.bias_correction2_sqrt + s.eps;
  p = decayed - s.step_size * mi / denom;
  m = mi;
  v = vi;
}

// Optimizer state must be f32, contiguous, shaped like the parameter and on its device.
inline void check_optimizer_state(const char* kernel, const Tensor& param,
                                  std::initializer_list<Tensor> state) {
  GLASS_CHECK(param.dtype() == DType::f32 && param.is_contiguous(),
              "{}: parameter {} must be contiguous f32", kernel, param.describe());
  for (const Tensor& t : state)
    GLASS_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == param.shape() &&
                    t.device() == param.device(),
                "{}: state {} must be contiguous f32 shaped like the parameter {}, on its device",
                kernel, t.describe(), param.describe());
}

// SGD's tensors: without momentum there is no buffer to keep, so `buf` may then be undefined.
inline void check_sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf,
                           double momentum) {
  GLASS_CHECK(buf.defined() || momentum == 0, "sgd_step: momentum {} needs a buffer for {}",
              momentum, param.describe());
  if (buf.defined())
    check_optimizer_state("sgd_step", param, {grad, buf});
  else
    check_optimizer_state("sgd_step", param, {grad});
}

// Every parameter of a multi-tensor AdamW step checked before any is touched.
inline void check_adamw_step(std::span<const AdamWParam> params, const AdamWHyper& h) {
  GLASS_CHECK(h.step >= 1, "adamw_step: step {} must count from 1", h.step);
  GLASS_CHECK(!h.finite.defined() || (h.finite.dtype() == DType::f64 && h.finite.numel() == 1 &&
                                      h.finite.device() == params[0].param.device()),
              "adamw_step: the finite gate {} must be f64 [1] on {}", h.finite.describe(),
              params[0].param.device().str());
  for (const AdamWParam& a : params) {
    check_optimizer_state("adamw_step", a.param, {a.grad, a.m, a.v});
    GLASS_CHECK(a.param.device() == params[0].param.device(),
                "adamw_step: parameter {} is not on the device of {}", a.param.describe(),
                params[0].param.describe());
    GLASS_CHECK(!a.copy.defined() ||
                    (a.copy.dtype() == DType::bf16 && a.copy.is_contiguous() &&
                     a.copy.shape() == a.param.shape() && a.copy.device() == a.param.device()),
                "adamw_step: the copy {} of parameter {} must be contiguous bf16 of its shape, on "
                "its device",
                a.copy.describe(), a.param.describe());
  }
}

// AdamWHyper::scalars: f32, contiguous, one float per scalar and parameter, on the params' device.
inline void check_adamw_scalars(std::span<const AdamWParam> params, const Tensor& table) {
  GLASS_CHECK(table.dtype() == DType::f32 && table.is_contiguous() && table.dim() == 1 &&
                  table.numel() == adamw_table_size(params.size()) &&
                  table.device() == params[0].param.device(),
              "adamw_step: the step's scalars {} must be contiguous f32 [{}] (7 + one per "
              "parameter) on {}",
              table.describe(), adamw_table_size(params.size()), params[0].param.device().str());
}

// step_status: a one-element loss (f32 or bf16), sum_sq f64 [1], status contiguous f64 [3], one
// device.
inline void check_step_status(const Tensor& loss, const Tensor& sum_sq, const Tensor& status) {
  GLASS_CHECK(loss.numel() == 1 && (loss.dtype() == DType::f32 || loss.dtype() == DType::bf16),
              "step_status: the loss {} must be one f32 or bf16 value", loss.describe());
  GLASS_CHECK(sum_sq.dtype() == DType::f64 && sum_sq.numel() == 1,
              "step_status: the sum of squares {} must be f64 [1]", sum_sq.describe());
  GLASS_CHECK(status.dtype() == DType::f64 && status.numel() == 3 && status.is_contiguous(),
              "step_status: the status {} must be contiguous f64 [3]", status.describe());
  GLASS_CHECK(loss.device() == status.device() && sum_sq.device() == status.device(),
              "step_status: {}, {} and {} must be on one device", loss.describe(),
              sum_sq.describe(), status.describe());
}

// clip_scale: x contiguous, sum_sq f64 [1] on x's device.
inline void check_clip_scale(const Tensor& x, const Tensor& sum_sq) {
  GLASS_CHECK(x.is_contiguous(), "clip_scale: {} must be contiguous", x.describe());
  GLASS_CHECK(sum_sq.dtype() == DType::f64 && sum_sq.numel() == 1 && sum_sq.device() == x.device(),
              "clip_scale: the sum of squares {} must be f64 [1] on the device of {}",
              sum_sq.describe(), x.describe());
}

}  // namespace glass::kernels
