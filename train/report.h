// The step explorer: one self-contained HTML page (train_gpt --report, profile_op --report,
// debug_step --report) that shows one recorded training step as a learner reads it, in the
// course's order: a summary of the run's numbers, each explaining itself on hover; a timeline of
// the step's launches in its phases (zoom, pan, details), with the host's own work (reading the
// batch, waiting for the device, writing a checkpoint) as bands in lanes of their own; the tape
// graph of the step, linked to the timeline, each node with its gradient norm after backward; the
// memory ledger by category (train/memory_ledger.h) beside the cost model's predicted peak; a
// roofline of every kernel; the per-kernel self vs total time and the loss curves.
//
// The page is the data (one JSON object, built here) and the code that draws it:
// train/explorer/explorer.js and explorer.css, compiled in as text (cmake/embed_text.cmake). It
// fetches nothing. Apart from timings the same run writes the same bytes (the JSON's keys are
// sorted, its arrays in launch or tape order). Rendered, it sets document.body.dataset.ready = "1"
// and marks its parts for tests: data-launch="<i>" per launch of the step, data-node="<id>" per
// tape node, data-ledger="<category>" per ledger series, data-kernel="<name>" per roofline point.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tape_record.h"
#include "engine/kernel_summary.h"
#include "engine/trace.h"
#include "train/memory_ledger.h"

namespace glass::train {

// One step as the trainer timed it.
struct StepTiming {
  int64_t step = 0;
  double ms = 0, tokens_per_s = 0;
  int64_t host_syncs = 0;
  bool profiled = false;  // observed by the profiler (slower: every launch is timed)
};

// The numbers of the run that do not come from its launches.
struct RunFacts {
  std::string model, device, dtype;  // "GPT(L=4, H=4, C=256, ...)", "cpu", "f32"
  double tokens_per_step = 0;
  // MFU: the model's FLOPs per token (0: no model, no MFU) and how they were counted.
  double model_flops_per_token = 0;
  std::string mfu_formula;
  DType peak_dtype = DType::f32;  // whose FLOP/s peak MFU and HFU are against
  std::vector<StepTiming> steps;
  int64_t peak_allocated_bytes = 0, peak_reserved_bytes = 0;  // the run's, from the allocator
  // The cost model's prediction of the step's peak allocated bytes, and where it comes from.
  std::optional<double> predicted_peak_bytes;
  std::string predicted_source;
};

struct ReportInputs {
  std::string title;                                            // what was trained, on what
  std::vector<std::string> notes;                               // lines shown under the title
  std::vector<std::pair<double, double>> train_loss, val_loss;  // (step, loss)
  KernelSummary kernels;                                        // of the profiled steps
  int64_t step = 0;                         // the recorded step: timeline, tape, ledger
  std::vector<TracedLaunch> step_launches;  // its launches, in launch order (seq)
  std::vector<TapeNode> tape;               // its tape (empty: no tape graph), with grad norms
  std::vector<HostSpan> host_spans;         // its host work that launches nothing (data, ...)
  std::optional<MemoryLedger> ledger;       // its ledger (none: only allocated and reserved)
  RunFacts facts;
};

// The page's data, as the JavaScript reads it (for tests; render_report embeds it).
nlohmann::json report_data(const ReportInputs& in);
std::string render_report(const ReportInputs& in);

}  // namespace glass::train
