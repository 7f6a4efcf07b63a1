// TrainProfiler: what train_gpt's --trace, --report and --profile-steps do.
//
// During the profiled steps (a:b, 1-based, inclusive) a TraceRecorder watches every launch;
// outside them nothing is subscribed and the gateway stays on its fast path. At the end it writes
// the Chrome trace, prints the per-kernel summary and writes the HTML report (loss curves over all
// steps, kernels and memory of the profiled steps). In cuda builds NVTX ranges mark the same steps'
// phases and ops for Nsight.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/nvtx_ranges.h"
#include "engine/trace.h"

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
  void end_step(int64_t step, double loss);
  void add_val_loss(int64_t step, double loss);
  // Writes the trace and the report and prints the kernel summary; `title` and `notes` head the
  // report.
  void finish(const std::string& title, const std::vector<std::string>& notes);

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
};

}  // namespace glass::train
