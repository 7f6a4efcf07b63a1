// AdamW with PyTorch's semantics (torch.optim.AdamW), one multi-tensor adamw_step launch for all
// parameters (one per 32 on cuda/emu):
//   p -= lr * wd * p                          (decoupled weight decay; only on >= 2-D parameters)
//   m  = beta1 m + (1 - beta1) g              (exp_avg)
//   v  = beta2 v + (1 - beta2) g^2            (exp_avg_sq)
//   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)     t = step_count()
// State buffers for checkpoints: "exp_avg.<param>" and "exp_avg_sq.<param>".
// With bf16 working copies of the parameters (set_compute_copies), the same launch also writes
// each copy from its updated parameter, as llm.c's AdamW does: no cast pass after the step.
//
// On emu and cuda the step's scalars (lr / (1 - beta1^t), sqrt(1 - beta2^t), 1 - lr wd, formed in
// double on the host as on cpu) reach the kernel through device memory that AdamW keeps, not as
// launch arguments: a CUDA graph that captured step() replays it with the values staged for each
// replay (stage_scalars) rather than those of the captured step.
#pragma once

#include "kernels/backend.h"
#include "optim/optimizer.h"

namespace glass {

struct AdamWOptions {  // PyTorch's defaults
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

class AdamW : public Optimizer {
 public:
  AdamW(NamedTensors params, const AdamWOptions& options);
  const char* name() const override { return "adamw"; }
  const AdamWOptions& options() const { return options_; }
  // emu, cuda: writes the scalars of step `step` at learning rate `lr`, for every parameter, into
  // the device memory the update kernels read (a copy queued on the current stream: no host
  // wait). step() stages its own step when it is not staged yet; a caller replaying a captured
  // step() stages each replay's step first. Nothing on cpu.
  void stage_scalars(int64_t step, double lr);
  // The finite gate (optim/step_status.h) the next step() reads on the device: f64 [1], 0 there
  // leaves the weights and moments untouched. Undefined (the default): every step updates.
  void set_finite_gate(const Tensor& finite) { finite_ = finite; }
  // The parameters' bf16 working copies (nn/module.h: Module::parameter_copies), one per
  // parameter in params()' order, undefined where a parameter has none; empty: none. Each step()
  // then writes a copy with its parameter's new value rounded to nearest even, the bits
  // Module::refresh_compute_copies' cast would give, so the copies need no refresh after it.
  // Checked here: bf16, contiguous, each its parameter's shape and device.
  void set_compute_copies(std::vector<Tensor> copies);

 protected:
  void update(const std::vector<size_t>& with_grad) override;
  // For a subclass that keeps its moments itself (comm/zero_adamw.h): no per-parameter buffers.
  struct WithoutBuffers {};
  AdamW(NamedTensors params, const AdamWOptions& options, WithoutBuffers);
  const Tensor& finite_gate() const { return finite_; }
  // set_compute_copies' checks: one copy per parameter (or none), each bf16, contiguous, of its
  // parameter's shape and device.
  void check_compute_copies(const std::vector<Tensor>& copies) const;

 private:
  AdamW(NamedTensors params, const AdamWOptions& options, std::vector<std::string> buffer_names);
  // Parameter i's update with its decoupled weight decay (matrices decay, vectors do not); grad,
  // m and v are filled in only where the update needs them.
  kernels::AdamWParam param_entry(size_t i) const;

  AdamWOptions options_;        // .lr is only the initial value: lr() is the current one
  Tensor scalars_;              // the staged table (kernels/optim_math.h: adamw_scalar_table)
  std::vector<Tensor> copies_;  // set_compute_copies
  Tensor finite_;
  int64_t staged_step_ = 0;
  double staged_lr_ = -1;
};

}  // namespace glass
