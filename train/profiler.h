// TrainProfiler: what train_gpt's --trace, --report and --profile-steps do.
//
// During the profiled steps (a:b, 1-based, inclusive) a TraceRecorder watches every launch;
// outside them nothing is subscribed and the gateway stays on its fast path. The last profiled
// step is the recorded one: its tape is kept (record_tape, taken from the loss after forward), so
// that the trace, the report and --print-tape show the same node ids. At the end it writes the
// Chrome trace (with the memory ledger's counters), prints the per-kernel summary and writes the
// step explorer (train/report.h: summary, timeline, tape graph, memory ledger, roofline, tables
// and the loss curves over all steps). In cuda builds NVTX ranges mark the same steps' phases and
// ops for Nsight.
//
// Two things the step explorer shows are not launches of the recorded step:
// - host spans (engine/trace.h HostSpan): the host work of the profiled steps that launches
//   nothing (reading the batch, the status read, writing a checkpoint), kept for the trace's "host
//   work" track and the timeline's bands;
// - the gradient norm of every tape node, measured on a pass of its own (set_grad_norm_tape) that
//   the trainer runs before the recorded step with the recorder paused (run_unobserved): measuring
//   them inside the step would add a reduction per node and a host read to the timeline the report
//   shows. The pass's tape is the step's node for node (same code, weights, batch and dropout
//   state); finish() checks that (op and shape at each position) before it copies the norms over.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tape_record.h"
#include "engine/nvtx_ranges.h"
#include "engine/trace.h"
#include "train/memory_ledger.h"
#include "train/report.h"

namespace glass::train {

struct ProfileOptions {
  std::string trace;   // Chrome-trace JSON path ("" = none)
  std::string report;  // HTML path ("" = none)
  std::string steps;   // "a:b"; "" = the second step (the first also fills the allocator's cache)
};

class TrainProfiler {
 public:
  // Steps first..last will run. Throws glass::Error naming the flag when --profile-steps is
  // malformed or outside first..last.
  TrainProfiler(const ProfileOptions& options, int64_t first, int64_t last, Device device);

  bool enabled() const { return !opt_.trace.empty() || !opt_.report.empty(); }
  void begin_step(int64_t step);
  void end_step(const StepTiming& timing, double loss);
  void add_val_loss(int64_t step, double loss);
  // True for the step whose tape the trace, report and --print-tape show: the last profiled one.
  bool records_tape(int64_t step) const { return enabled() && step == to_; }
  void set_tape(std::vector<TapeNode> tape) { tape_ = std::move(tape); }
  // True before the recorded step when the report wants its tape's gradient norms.
  bool wants_grad_norms(int64_t step) const { return records_tape(step) && !opt_.report.empty(); }
  // The recorded step's tape as a separate pass recorded it, with gradient norms.
  void set_grad_norm_tape(std::vector<TapeNode> tape) { grad_norm_tape_ = std::move(tape); }
  // Runs `work` with nothing recorded (the trace, NVTX): work that is not the steps'.
  void run_unobserved(const std::function<void()>& work);
  // Host work of a step (kept when the step is profiled).
  void host_span(const HostSpan& span);
  // What the step holds before it starts (the ledger's state categories).
  void set_ledger_state(LedgerState state) { ledger_state_ = std::move(state); }
  // Writes the trace and the report and prints the kernel summary; `title` and `notes` head the
  // report, `facts` fill its summary (their steps are the ones end_step saw).
  void finish(const std::string& title, const std::vector<std::string>& notes, RunFacts facts);

  int64_t first_profiled() const { return from_; }
  int64_t last_profiled() const { return to_; }

 private:
  void stop_recording();

  ProfileOptions opt_;
  Device device_;
  int64_t from_ = 0, to_ = -1;
  TraceRecorder recorder_;
#if GLASS_HAS_CUDA
  NvtxRanges nvtx_;  // Nsight sees the profiled steps' phases and ops too
#endif
  std::vector<std::pair<double, double>> train_loss_, val_loss_;
  std::vector<StepTiming> steps_;
  std::vector<TapeNode> tape_, grad_norm_tape_;
  LedgerState ledger_state_;
};

// The explorer for one recorded pass outside train_gpt (profile_op, debug_step): `launches` (as
// its step 1, which took `ms` on the host), the tape of the pass when there is one (empty: no
// tape graph, and a ledger of allocated and reserved only) and the state it held.
std::string render_pass_report(const std::string& title, const std::vector<std::string>& notes,
                               std::vector<TracedLaunch> launches,
                               const std::vector<TapeNode>& tape, const LedgerState& state,
                               Device device, DType dtype, double ms);

}  // namespace glass::train
