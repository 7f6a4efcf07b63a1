// One training step, and nothing around it (no printing, no files, no timing): the Trainer
// (train/trainer.h) runs it, the step planner (train/step_plan.h) records its device work on
// `meta`, so a planned step is the trained one because it is this code.
//
//   for each of the k = --grad-accum micro-steps m (this rank's rows of batch m, train/data.h):
//     loss_m = cross-entropy of the model's next-token predictions        (batch_loss)
//     backward(loss_m / k)             gradients add up in .grad; with data parallelism the
//                                      last micro-step's backward all-reduces them in buckets
//   sum_sq = sum of every gradient squared; gradients *= clip / |g| when |g| > clip
//   status = {sum of loss_m, |g|, finite}; AdamW gated on `finite` (a NaN or infinity anywhere
//            never reaches the weights or the moments), writing the bf16 copies; zero_grad
//                                                                          (queue_step_update)
//   the host reads the status once, at the end: the step's only wait for the device
//
// Eager, every step is queued as above. With --cuda-graph the first step of a run is eager (the
// warm-up) and every later one replays a CUDA graph captured from the same code (train/
// graph_step.h): all micro-steps unrolled in one graph, AdamW's scalars and dropout's offsets
// read from device memory staged before each replay. A non-finite step is dropped (the gate kept
// the weights) and then, under --on-nonfinite stop, re-run in anomaly mode to name the first node
// that produced the value, or, under skip, marked skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tape_record.h"
#include "comm/communicator.h"
#include "comm/data_parallel.h"
#include "engine/trace.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "train/data.h"
#include "train/distributed.h"
#include "train/graph_step.h"
#include "train/run_config.h"

namespace glass::train {

// The mean cross-entropy of the model's next-token predictions for one batch.
Tensor batch_loss(const CausalLM& model, const Batch& b);

// Forward and backward of each micro-step's batch, backward of loss_m / k so that .grad holds the
// mean of the k micro-steps' gradients; returns the sum of their losses (detached, on the device).
// `before_backward(loss, m)`, when set, sees each micro-step's loss before its backward.
Tensor accumulate_gradients(const CausalLM& model, const std::vector<Batch>& batches,
                            const std::function<void(const Tensor&, int64_t)>& before_backward);

// After forward and backward of the step's micro-steps: the global gradient norm (and clipping
// to `grad_clip`, 0 = off), the step status (optim/step_status.h), the gated AdamW step at `lr`
// (which writes the model's bf16 compute copies; with ZeRO they are refreshed after it) and
// zero_grad. Returns the status, f64 [3] on the device.
// `step` (1-based) names the step in errors. Nothing here makes the host wait.
Tensor queue_step_update(CausalLM& model, AdamW& optimizer, const Tensor& loss_sum, double lr,
                         double grad_clip, int64_t step);

struct StepResult {
  int64_t step = 0;  // 1-based number of the step just done
  double loss = 0, lr = 0, grad_norm = 0, ms = 0, tokens_per_s = 0;
  // Times the host waited for the device during the step (engine/launch.h, note_host_sync): 1,
  // the step status (loss, gradient norm and the finite gate, optim/step_status.h) read in one
  // copy at the end; 0 on cpu, which never waits.
  int64_t host_syncs = 0;
  bool skipped = false;  // non-finite loss or gradients under --on-nonfinite skip: no update
};

// Where callers look into the step. Each hook is called when the step's work is queued; a
// captured step (--cuda-graph) is queued once, at the capture, and replayed after that, so a hook
// that launches work whose effect differs from step to step reads its values from device memory
// that before_step writes (before_step runs for every step, outside the capture).
struct StepHooks {
  // Before the step's work, outside any capture. `step`: 1-based.
  std::function<void(int64_t step)> before_step;
  // After each micro-step's forward, with its loss (still on the tape): the Trainer records the
  // profiled step's tape here, and prints it under --print-tape.
  std::function<void(const Tensor& loss, int64_t micro)> after_forward;
  // After backward of every micro-step (the gradients reduced over the ranks), before the norm,
  // the status and AdamW: tests put a NaN into a gradient here.
  std::function<void(int64_t step)> after_backward;
  // Host work of the step that launches nothing, timed on the launch clock: reading the batch
  // ("data") and the read of the step status ("host wait"). The profiler draws them as bands.
  std::function<void(const HostSpan& span)> host_span;
};

// What the step works on, assembled and owned by the caller for the step's life.
struct StepParts {
  CausalLM* model = nullptr;
  AdamW* optimizer = nullptr;
  const BatchLoader* loader = nullptr;  // the training split
  Generator* dropout = nullptr;         // the generator dropout draws from
  comm::Communicator* comm = nullptr;
  comm::DataParallel* ddp = nullptr;  // with every backend but local, else nullptr
  GraphStep* graph = nullptr;         // --cuda-graph, else nullptr
};

class TrainStep {
 public:
  // `run` (its batch, grad_accum, grad_clip, on_nonfinite and device) is read at each step.
  TrainStep(const RunConfig& run, StepParts parts);

  // The step after `done` steps, at learning rate `lr`: queued, then its status read (after the
  // replay's all-reduces, bounded by --comm-timeout). Fills loss (the mean over micro-steps and
  // ranks), grad_norm, lr and skipped. A non-finite step under --on-nonfinite stop throws,
  // naming the step and where the value arose; the weights were not updated.
  StepResult run(int64_t done, double lr);

  StepHooks& hooks() { return hooks_; }

  // The tape of the step after `done` steps, as its first micro-step will record it, with every
  // node's gradient norm (autograd/grad_norms.h): forward and backward of that micro-step run
  // once more, from the same weights, batch and dropout state, before the step itself; the
  // gradients are then dropped and the dropout generator put back, so the step that follows is
  // the same bits as without this pass. For the step explorer, outside any profiled window: the
  // norms need a reduction per node and a read, which the recorded step must not contain.
  // Under data parallelism each rank runs it alone (its backward all-reduces nothing: the
  // gradient sync is paused for it) on its own rows: the norms are of this rank's loss.
  std::vector<TapeNode> tape_with_grad_norms(int64_t done);

 private:
  // The eager step's forward and backward of every micro-step (the batches in two uploads,
  // train/micro_batches.h); returns the sum of their losses, on the device.
  Tensor forward_backward(const RowRange& rows, int64_t done);
  // Hands hooks_.host_span the host work from `start_us` to now, of step `step`.
  void note_host_span(const char* name, const char* phase, double start_us, int64_t step) const;
  // This rank's rows of every micro-step of the step, on the host.
  std::vector<Batch> host_micro_batches(const RowRange& rows, int64_t done) const;
  // The micro-steps' forward and backward on `batches` (the eager and the captured step's loop).
  Tensor accumulate_micro_steps(const std::vector<Batch>& batches);
  // after_backward, the norm, the status and the gated update (queue_step_update).
  Tensor finish_on_device(const Tensor& loss_sum, double lr, int64_t done);
  // --cuda-graph after the eager warm-up step: capture (once) and replay.
  Tensor replay(const RowRange& rows, double lr, int64_t done);
  // Runs the step's forward and backward again in anomaly mode (GLASS_CHECK_NAN) from the dropout
  // state it started with, and returns the sentence naming the first node that made a NaN/Inf.
  std::string locate_nonfinite(int64_t done, uint64_t rng_offset);

  const RunConfig& run_;
  StepParts p_;
  StepHooks hooks_;
  bool warmed_up_ = false;  // a step of this run has completed (--cuda-graph replays from then)
};

}  // namespace glass::train
