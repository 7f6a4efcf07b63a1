// Optimizer: updates named parameters from their gradients, and exports its state for checkpoints.
//
// The base class owns what every optimizer shares: the parameters (by name), the learning rate,
// the step count, per-parameter state buffers (e.g. AdamW's exp_avg and exp_avg_sq), and the step
// loop, which runs under NoGradGuard and LaunchScope(name, -1, Phase::optimizer) so that every
// update kernel shows up as an optimizer launch. A subclass names its buffers and updates the
// parameters that have gradients (AdamW all at once, in one multi-tensor launch).
//
// zero_grad() sets gradients to undefined (PyTorch's set_to_none=True): the next backward then
// writes fresh gradients instead of adding into zero-filled ones, which saves a fill launch per
// parameter. A parameter whose gradient is undefined at step() is skipped.
//
// Weight decay (both optimizers) applies only to parameters with 2 or more dimensions (matrices
// and embeddings), never to biases or LayerNorm parameters: nanoGPT's two parameter groups.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace glass {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient; step_count() goes up by one first (the
  // first step is step 1, as in PyTorch's bias correction).
  void step();
  void zero_grad();
  // What step() does on the host alone, for a CUDA graph that replays a captured step(): the step
  // count goes up by one (the update itself is the graph's; train/step.cpp, --cuda-graph).
  void count_replayed_step() { ++step_; }
  // A step the finite gate turned away on the device (optim/step_status.h) did not happen: the
  // count goes back, so the next step's bias correction is the one this step would have used.
  void uncount_skipped_step() { --step_; }

  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t step_count() const { return step_; }
  const NamedTensors& params() const { return params_; }
  virtual const char* name() const = 0;

  // --- checkpoint state ---
  // Every state buffer as "<buffer>.<param name>", e.g. "exp_avg.transformer.wte.weight", in
  // buffer-major, then parameter order. Handles to the live buffers: save them, don't modify them.
  // Virtual: a sharded optimizer (comm/zero_adamw.h) answers with the consolidated state, as the
  // unsharded one holds it.
  virtual NamedTensors state_tensors() const;
  // {"step": step_count, "lr": lr}.
  std::map<std::string, double> state_scalars() const;
  // Restores both. Every expected buffer must be present with its parameter's shape (a floating
  // dtype is converted) and no unknown name may appear; "step" is required, "lr" optional. All is
  // checked before anything changes; the error lists every problem.
  virtual void load_state(const NamedTensors& tensors,
                          const std::map<std::string, double>& scalars);

 protected:
  // Parameters must be distinct, defined, f32, contiguous and have unique names. One zero-filled
  // state buffer per parameter is made for each name in `buffer_names`.
  Optimizer(NamedTensors params, double lr, std::vector<std::string> buffer_names);

  // The checks every load_state makes before it changes anything: each of `expected`'s names
  // must be in `given` once, floating, with the expected tensor's shape (`holder` says what has
  // that shape in the message: "the optimizer holds", "the parameter is"), and no other name may
  // appear. Returns the matches in `expected`'s order (nullptr where one is missing or wrong) and
  // adds one line per problem to `problems`.
  static std::vector<const Tensor*> match_state_tensors(const NamedTensors& given,
                                                        const NamedTensors& expected,
                                                        const char* holder,
                                                        std::vector<std::string>& problems);

  // Updates the parameters with these indices (those that have a gradient, of the parameter's
  // shape and dtype: checked) from their gradients, at step_count().
  virtual void update(const std::vector<size_t>& with_grad) = 0;
  // State buffer b of parameter i.
  const Tensor& buffer(size_t b, size_t i) const { return buffers_[b][i]; }
  // Whether weight decay applies to parameter i (2 or more dimensions).
  bool decays(size_t i) const { return params_[i].second.dim() >= 2; }

 private:
  NamedTensors params_;
  double lr_;
  int64_t step_ = 0;
  std::vector<std::string> buffer_names_;
  std::vector<std::vector<Tensor>> buffers_;  // [buffer][param]
};

}  // namespace glass
