// The step's status and its finite gate (docs/reliability.md: --on-nonfinite).
//
// After backward and the gradients' sum of squares, one kernel writes {loss, gradient norm,
// finite} into device memory (kernels::Backend::step_status). AdamW reads `finite` on the device
// (AdamW::set_finite_gate) and leaves the weights and moments untouched when it is 0, so a NaN or
// infinity never reaches them, without the host deciding first. The host reads the three values
// once, at the end of the step, after the update was queued: the step's one synchronisation,
// which a CUDA graph of the whole step allows (nothing in the step waits for the host).
#pragma once

#include "engine/tensor.h"

namespace glass {

// f64 [3] on the loss's device: {loss, sqrt(sum_sq), 1 if both are finite else 0}. `loss` is a
// one-element f32 (or bf16) tensor, `sum_sq` f64 [1] (optim/clip.h: clip_grad_norm_on_device).
// Launches in Phase::optimizer.
Tensor step_status(const Tensor& loss, const Tensor& sum_sq);

// The finite gate inside a status: its third value, f64 [1] (a view).
Tensor finite_gate(const Tensor& status);

struct StepStatus {
  double loss = 0, grad_norm = 0;
  bool finite = false;
};
// The one host read of a step: the three values in one copy.
StepStatus read_step_status(const Tensor& status);

}  // namespace glass
