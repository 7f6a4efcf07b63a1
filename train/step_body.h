// The device work of one training step, written once for the two callers that queue it: the
// Trainer (train/trainer.h), which runs it, and the step planner (train/step_plan.h), which runs it
// on `meta` to see its launches and memory. A planned step is the trained one because it is this
// code.
//
//   loss   = cross-entropy of the model's next-token predictions        (batch_loss)
//   backward(loss)                                                      (the caller)
//   sum_sq = sum of every gradient squared; gradients *= clip / |g| when |g| > clip
//   status = {loss, |g|, finite}; AdamW gated on `finite`, writing the bf16 copies; zero_grad
//                                                                       (queue_step_update)
// Nothing here makes the host wait: the status is read by the caller, once, at the step's end.
#pragma once

#include <cstdint>

#include "nn/gpt.h"
#include "optim/adamw.h"
#include "train/data.h"

namespace glass::train {

// The mean cross-entropy of the model's next-token predictions for one batch.
Tensor batch_loss(const CausalLM& model, const Batch& b);

// After forward and backward of the step's micro-steps: the global gradient norm (and clipping
// to `grad_clip`, 0 = off), the step status (optim/step_status.h), the gated AdamW step at `lr`
// (which writes the model's bf16 compute copies; with ZeRO they are refreshed after it) and
// zero_grad. Returns the status, f64 [3] on the device.
// `step` (1-based) names the step in errors.
Tensor queue_step_update(CausalLM& model, AdamW& optimizer, const Tensor& loss_sum, double lr,
                         double grad_clip, int64_t step);

}  // namespace glass::train
