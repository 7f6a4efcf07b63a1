// Costs of the optimizer kernels and of clip_scale and step_status, shared by
// kernels/cpu/optim.cpp and kernels/cuda/optim.cu (kernels/costs/launch_cost.h).
// f32 parameters, updated in place.
#pragma once

#include <cstdint>

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"

namespace glass::kernels {

// AdamW over n elements in all (one launch on cpu; one per group of up to 32 parameters on
// emu/cuda, each counting its own n): 16 FLOPs per element; p, g, m, v read and p, m, v written
// (f32), and the bf16 copies of the n_copied elements whose parameters have one written.
inline LaunchCost adamw_step_cost(int64_t n, int64_t n_copied) {
  return {16.0 * static_cast<double>(n),
          7.0 * 4.0 * static_cast<double>(n) + 2.0 * static_cast<double>(n_copied)};
}

// SGD: 5 FLOPs per element; p, g (and buf) read, p (and buf) written.
inline LaunchCost sgd_step_cost(const Tensor& param, bool use_buf) {
  return {5.0 * static_cast<double>(param.numel()),
          (use_buf ? 5.0 : 3.0) * static_cast<double>(param.nbytes())};
}

// step_status: 4 FLOPs (the square root and the finite tests); the loss and the f64 sum read,
// three f64 written.
inline LaunchCost step_status_cost(const Tensor& loss) {
  return {4.0, static_cast<double>(loss.nbytes()) + 4.0 * sizeof(double)};
}

// clip_scale: the f64 sum read and, when the norm is over max_norm, x scaled in place (one FLOP
// and a read and a write per element). Whether it scales is known when it launches on cpu (the
// sum is host memory there), which counts it; on emu/cuda it is decided on the device after the
// launch, so the launch counts only the sum (counting the scaling always would put each launch
// that finds the norm in bounds, and returns at once, above the bandwidth roof).
inline LaunchCost clip_scale_cost(const Tensor& x, bool scales) {
  return {scales ? static_cast<double>(x.numel()) : 0.0,
          sizeof(double) + (scales ? 2.0 * static_cast<double>(x.nbytes()) : 0.0)};
}

}  // namespace glass::kernels
