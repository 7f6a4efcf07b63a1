#include "train/step_body.h"

#include <cmath>

#include "comm/zero_adamw.h"
#include "engine/launch.h"
#include "optim/clip.h"
#include "optim/step_status.h"

namespace glass::train {

Tensor batch_loss(const CausalLM& model, const Batch& b) {
  return model.loss(model.forward(b.x), b.y);
}

Tensor queue_step_update(CausalLM& model, AdamW& optimizer, const Tensor& loss_sum, double lr,
                         double grad_clip, int64_t step) {
  // 1. The global gradient norm's square, every step: clipping scales by it (on the device), and
  //    a NaN or infinity anywhere in the gradients shows in it. A non-finite norm scales nothing.
  //    Sharded (--zero 1): over the ranks' chunks of the reduced gradients (comm/zero_adamw.h).
  const double bound = grad_clip > 0 ? grad_clip : INFINITY;
  auto* zero = dynamic_cast<comm::ZeroAdamW*>(&optimizer);
  const Tensor sum_sq = zero != nullptr ? zero->clip_grad_norm_on_device(bound)
                                        : clip_grad_norm_on_device(model.parameters(), bound);
  GLASS_CHECK(sum_sq.defined(), "step {}: no parameter has a gradient", step);
  // 2. The status the host reads at the end, and the finite gate AdamW reads on the device.
  const Tensor status = step_status(loss_sum, sum_sq);
  optimizer.set_finite_gate(finite_gate(status));
  optimizer.set_lr(lr);
  // 3. The bf16 copies of the masters (none in f32) are a pure function of them (round to
  //    nearest even). AdamW writes them in its own pass, from the values it has just written
  //    (optim/adamw.h); ZeRO's update gathers the masters after its kernels, so there they are
  //    cast from the gathered masters. Not gated: a skipped step left the masters as they were.
  const bool copies_in_step = zero == nullptr && model.compute_dtype() == DType::bf16;
  optimizer.set_compute_copies(copies_in_step ? model.parameter_copies() : std::vector<Tensor>{});
  optimizer.step();
  optimizer.zero_grad();
  if (!copies_in_step) {
    LaunchScope scope("refresh_compute_copies", -1, Phase::optimizer);
    model.refresh_compute_copies();
  }
  return status;
}

}  // namespace glass::train
