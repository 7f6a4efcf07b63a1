// What a training run tells people and programs, worded in one place: the set-up lines (the
// logger), one progress line per step on stdout (unless --quiet; always with a validation loss),
// one JSON object per step appended to --metrics (JSONL), the summary after the last step, the
// line of a run stopped by a signal, and the sample. Nothing here computes the run's numbers:
// the Trainer measures them and calls these on rank 0, which speaks for every rank.
//
// A --metrics line: {"step", "loss", "lr", "grad_norm", "ms", "tokens_per_s", "mfu", "hfu",
// "peak_allocated_bytes", "peak_reserved_bytes", "peak_in_use_bytes" (allocated, with a CUDA
// graph's private pool whole: engine/allocator.h), "planned_peak_bytes" (the pre-flight's plan of
// the peak in use; -1: none), "host_syncs", "skipped", and "val_loss" when evaluated}.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "nn/gpt_config.h"
#include "train/data.h"
#include "train/generate.h"
#include "train/mfu.h"
#include "train/preflight.h"
#include "train/run_config.h"
#include "train/step.h"

namespace glass::train {

// A step's figures beyond its StepResult.
struct StepFigures {
  std::optional<double> val_loss;  // when the step was evaluated
  const Mfu* mfu = nullptr;        // nullptr: none (the line says no MFU, the JSON says 0)
  int world = 1;                   // ranks: MFU is per device, each rank does 1/N of the tokens
  AllocatorStats memory;           // the device allocator's, after the step
  int64_t planned_peak_bytes = -1;
};

// The run's totals, for the summary.
struct RunTotals {
  int64_t steps = 0;  // run by this process (not a resumed checkpoint's)
  double seconds = 0, tokens_per_s = 0;
  double final_loss = 0;           // the last step not skipped (NaN: none); printed when steps > 0
  std::optional<double> val_loss;  // the last validation loss
  AllocatorStats memory;
  // The pre-flight's planned peak beside the peak measured after step `measured_step` (1 or 2).
  std::optional<int64_t> planned_peak_bytes, measured_peak_bytes;
  int64_t measured_step = 0;
  std::vector<int64_t> skipped_steps;  // 1-based, under --on-nonfinite skip
  // The run's MFU and HFU from tokens_per_s (split over `world` ranks); none without a peak.
  const Mfu* mfu = nullptr;
  int world = 1;
};

class RunLog {
 public:
  // --steps (the denominator of the progress lines) and --quiet.
  RunLog(int64_t steps, bool quiet) : steps_(steps), quiet_(quiet) {}

  // --metrics: appended to (a resumed run continues its file).
  void open_metrics(const std::string& path);

  // The pre-flight's line, the device and data, and the model.
  void setup(const RunConfig& run, int threads, const Dataset& data, const GPTConfig& config,
             int64_t parameters, AttentionKernel attention,
             const std::optional<PreflightResult>& preflight) const;
  void step(const StepResult& r, const StepFigures& f);
  void summary(const RunTotals& t) const;
  // After SIGINT or SIGTERM: `checkpoint` is where the run was saved ("": no --checkpoint-dir).
  void stopped(int signal, int64_t step, const std::string& checkpoint,
               const std::string& checkpoint_dir) const;
  void sample(const Generation& g, const std::string& tokenizer, const std::string& prompt,
              const std::string& text) const;

 private:
  int64_t steps_;
  bool quiet_;
  std::ofstream metrics_;
};

}  // namespace glass::train
