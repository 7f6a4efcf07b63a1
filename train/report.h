// The training report: one self-contained HTML page (inline SVG, no scripts, nothing fetched)
// with the loss curves, the per-kernel time breakdown, a roofline with each kernel as a point,
// and the allocator's memory over one recorded step.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/kernel_summary.h"

namespace glass::train {

struct ReportInputs {
  std::string title;                                            // what was trained, on what
  std::vector<std::string> notes;                               // lines shown under the title
  std::vector<std::pair<double, double>> train_loss, val_loss;  // (step, loss)
  KernelSummary kernels;
  std::vector<TracedLaunch> step_launches;  // one step's launches: the memory plot
};

std::string render_report(const ReportInputs& in);

}  // namespace glass::train
