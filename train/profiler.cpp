#include "train/profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "autograd/grad_norms.h"
#include "engine/allocator.h"
#include "engine/atomic_file.h"
#include "engine/error.h"
#include "engine/kernel_summary.h"
#include "engine/log.h"
#include "kernels/peaks.h"

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

// The ledger's categories as counters of the trace, in MiB, after each launch of the step.
void add_ledger_counters(TraceRecorder& recorder, const std::vector<TracedLaunch>& step,
                         const MemoryLedger& ledger) {
  for (size_t i = 0; i < step.size() && i < ledger.bytes.size(); ++i) {
    std::vector<std::pair<std::string, double>> values;
    for (size_t c = 0; c < kLedgerCategories.size(); ++c)
      values.emplace_back(kLedgerCategories[c],
                          static_cast<double>(ledger.bytes[i][c]) / (1 << 20));
    recorder.add_counter("memory ledger (MiB)", step[i].record.end_us, step[i].record.info.device,
                         values);
  }
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

void TrainProfiler::end_step(const StepTiming& timing, double loss) {
  train_loss_.emplace_back(static_cast<double>(timing.step), loss);
  StepTiming t = timing;
  t.profiled = recorder_.recording();
  steps_.push_back(t);
  if (!recorder_.recording()) return;
  recorder_.end_step();
  if (timing.step >= to_) stop_recording();
}

void TrainProfiler::run_unobserved(const std::function<void()>& work) {
  const bool was_recording = recorder_.recording();
  if (was_recording) stop_recording();
  work();
  if (was_recording) {
    recorder_.start();
#if GLASS_HAS_CUDA
    subscribe(&nvtx_);
#endif
  }
}

void TrainProfiler::host_span(const HostSpan& span) {
  if (enabled() && from_ <= span.step && span.step <= to_) recorder_.add_host_span(span);
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

void TrainProfiler::finish(const std::string& title, const std::vector<std::string>& notes,
                           RunFacts facts) {
  if (!enabled()) return;
  stop_recording();
  const std::vector<TracedLaunch> launches = recorder_.launches();
  GLASS_CHECK(!launches.empty(), "profiling: no launch was recorded in steps {}..{}", from_, to_);
  ReportInputs in;
  in.title = title;
  in.notes = notes;
  in.train_loss = train_loss_;
  in.val_loss = val_loss_;
  in.step = to_;
  for (const TracedLaunch& l : launches)
    if (l.step == to_) in.step_launches.push_back(l);
  std::sort(
      in.step_launches.begin(), in.step_launches.end(),
      [](const TracedLaunch& a, const TracedLaunch& b) { return a.record.seq < b.record.seq; });
  in.tape = tape_;
  if (!grad_norm_tape_.empty() && !copy_grad_norms(grad_norm_tape_, in.tape))
    log().warn(
        "report: the gradient-norm pass recorded a different tape than step {} ({} vs {} "
        "nodes); the tape graph shows no gradient norms",
        to_, grad_norm_tape_.size(), in.tape.size());
  for (const HostSpan& h : recorder_.host_spans())
    if (h.step == to_) in.host_spans.push_back(h);
  if (!tape_.empty()) {
    in.ledger = build_memory_ledger(in.step_launches, tape_, ledger_state_);
    add_ledger_counters(recorder_, in.step_launches, *in.ledger);
  }
  if (!opt_.trace.empty()) {
    recorder_.write(opt_.trace);
    log().info("trace of steps {}..{} ({} launches) written to {}", from_, to_, launches.size(),
               opt_.trace);
  }
  in.kernels = summarize_kernels(launches, kernels::peaks_for(device_));
  fmt::print("\nkernels of steps {}..{}:\n{}", from_, to_, in.kernels.table());
  if (opt_.report.empty()) return;
  facts.steps = steps_;
  in.facts = std::move(facts);
  in.notes.push_back(fmt::format(
      "Kernels table: steps {}..{}; timeline, tape, memory ledger and roofline: step {}.", from_,
      to_, to_));
  write_file_atomic(opt_.report, render_report(in));
  log().info("report written to {}", opt_.report);
}

std::string render_pass_report(const std::string& title, const std::vector<std::string>& notes,
                               std::vector<TracedLaunch> launches,
                               const std::vector<TapeNode>& tape, const LedgerState& state,
                               Device device, DType dtype, double ms) {
  GLASS_CHECK(!launches.empty(), "report: no launch was recorded");
  std::sort(launches.begin(), launches.end(), [](const TracedLaunch& a, const TracedLaunch& b) {
    return a.record.seq < b.record.seq;
  });
  for (TracedLaunch& l : launches) l.step = 1;
  ReportInputs in;
  in.title = title;
  in.notes = notes;
  in.step = 1;
  in.step_launches = launches;
  in.tape = tape;
  if (!tape.empty()) in.ledger = build_memory_ledger(launches, tape, state);
  in.kernels = summarize_kernels(launches, kernels::peaks_for(device));
  in.facts.device = device.str();
  in.facts.dtype = std::string(dtype_name(dtype));
  in.facts.peak_dtype = kernels::peaks_for(device).bf16_flops > 0 ? dtype : DType::f32;
  in.facts.steps = {{1, ms, 0, 0, true}};
  const AllocatorStats mem = Allocator::for_device(device).stats();
  in.facts.peak_allocated_bytes = mem.peak_allocated_bytes;
  in.facts.peak_reserved_bytes = mem.peak_reserved_bytes;
  return render_report(in);
}

}  // namespace glass::train
