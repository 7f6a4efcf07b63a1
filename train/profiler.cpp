#include "train/profiler.h"

#include <fmt/format.h>

#include <charconv>

#include "engine/atomic_file.h"
#include "engine/error.h"
#include "engine/kernel_summary.h"
#include "engine/log.h"
#include "kernels/peaks.h"
#include "train/report.h"

namespace glass::train {

namespace {

// "a:b" -> (a, b); throws naming the text when it is not two integers around a colon.
std::pair<int64_t, int64_t> parse_range(const std::string& text) {
  const auto colon = text.find(':');
  std::pair<int64_t, int64_t> r{0, 0};
  auto number = [&](size_t from, size_t to, int64_t& out) {
    const auto [end, ec] = std::from_chars(text.data() + from, text.data() + to, out);
    return from < to && ec == std::errc() && end == text.data() + to;
  };
  GLASS_CHECK(colon != std::string::npos && number(0, colon, r.first) &&
                  number(colon + 1, text.size(), r.second),
              "--profile-steps '{}': expected a:b, e.g. 2:3", text);
  return r;
}

}  // namespace

TrainProfiler::TrainProfiler(const ProfileOptions& options, int64_t first, int64_t last,
                             Device device)
    : opt_(options), device_(device) {
  if (!enabled()) {
    GLASS_CHECK(opt_.steps.empty(), "--profile-steps {} needs --trace or --report", opt_.steps);
    return;
  }
  if (opt_.steps.empty()) {
    from_ = to_ = std::min(first + 1, last);
  } else {
    std::tie(from_, to_) = parse_range(opt_.steps);
    GLASS_CHECK(first <= from_ && from_ <= to_ && to_ <= last,
                "--profile-steps {}: this run does steps {}..{}; need {} <= a <= b <= {}",
                opt_.steps, first, last, first, last);
  }
}

void TrainProfiler::begin_step(int64_t step) {
  if (step < from_ || step > to_) return;
  if (!recorder_.recording()) {
    recorder_.start();
#if GLASS_HAS_CUDA
    subscribe(&nvtx_);
#endif
  }
  recorder_.begin_step(step);
}

void TrainProfiler::end_step(int64_t step, double loss) {
  train_loss_.emplace_back(static_cast<double>(step), loss);
  if (!recorder_.recording()) return;
  recorder_.end_step();
  if (step >= to_) stop_recording();
}

void TrainProfiler::stop_recording() {
  recorder_.stop();
#if GLASS_HAS_CUDA
  unsubscribe(&nvtx_);
  nvtx_.close_phase();
#endif
}

void TrainProfiler::add_val_loss(int64_t step, double loss) {
  val_loss_.emplace_back(static_cast<double>(step), loss);
}

void TrainProfiler::finish(const std::string& title, const std::vector<std::string>& notes) {
  if (!enabled()) return;
  stop_recording();
  const std::vector<TracedLaunch> launches = recorder_.launches();
  GLASS_CHECK(!launches.empty(), "profiling: no launch was recorded in steps {}..{}", from_, to_);
  if (!opt_.trace.empty()) {
    recorder_.write(opt_.trace);
    log().info("trace of steps {}..{} ({} launches) written to {}", from_, to_, launches.size(),
               opt_.trace);
  }
  ReportInputs in{title,
                  notes,
                  train_loss_,
                  val_loss_,
                  summarize_kernels(launches, kernels::peaks_for(device_), DType::f32),
                  {}};
  fmt::print("\nkernels of steps {}..{}:\n{}", from_, to_, in.kernels.table());
  if (opt_.report.empty()) return;
  for (const TracedLaunch& l : launches)
    if (l.step == to_) in.step_launches.push_back(l);
  in.notes.push_back(fmt::format(
      "Kernels, roofline and memory: steps {}..{}; memory plot: step {}.", from_, to_, to_));
  write_file_atomic(opt_.report, render_report(in));
  log().info("report written to {}", opt_.report);
}

}  // namespace glass::train
