#include "train/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "engine/roofline.h"
#include "train/explorer_assets.h"

namespace glass::train {

namespace {

constexpr double MiB = 1 << 20;

std::string si(double v, const char* unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (std::abs(v) >= 1000 && p < 5) v /= 1000, ++p;
  return fmt::format("{:.3g} {}{}", v, prefixes[p], unit);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The union of the launches' intervals (nested launches count once): the time some kernel ran.
double busy_us(const std::vector<TracedLaunch>& ls) {
  std::vector<std::pair<double, double>> iv;
  for (const TracedLaunch& l : ls) iv.emplace_back(l.record.start_us, l.record.end_us);
  std::sort(iv.begin(), iv.end());
  double busy = 0, end = -1e300;
  for (const auto& [a, b] : iv) {
    if (b <= end) continue;
    busy += b - std::max(a, end);
    end = b;
  }
  return busy;
}

nlohmann::json card(const char* key, const std::string& label, double value,
                    const std::string& text, const std::string& explain) {
  return {{"key", key}, {"label", label}, {"value", value}, {"text", text}, {"explain", explain}};
}

// The summary's cards, each with its hover text: formula, inputs, peak and its source.
nlohmann::json summary(const ReportInputs& in, double step_flops) {
  const RunFacts& f = in.facts;
  const DevicePeaks& peaks = in.kernels.peaks;
  // The run's typical step: the median over the steps the profiler did not watch (watched
  // launches are timed one by one, which slows them), without the first step (it fills the
  // allocator's cache) when later ones remain.
  std::vector<const StepTiming*> typical;
  for (const StepTiming& s : f.steps)
    if (!s.profiled) typical.push_back(&s);
  if (typical.size() > 1 && typical.front()->step == f.steps.front().step)
    typical.erase(typical.begin());
  std::string which =
      "the median over the steps outside the profiled ones (the first step, which "
      "fills the allocator's cache, left out)";
  if (typical.empty()) {
    for (const StepTiming& s : f.steps) typical.push_back(&s);
    which = "the median over all steps (every step was profiled, so timed launch by launch)";
  }
  std::vector<double> tps, ms;
  for (const StepTiming* s : typical) tps.push_back(s->tokens_per_s), ms.push_back(s->ms);
  const double tokens_per_s = median(tps), step_ms = median(ms);
  const double peak = peaks.flops(f.peak_dtype);
  const std::string peak_text = fmt::format("peak {} ({} on {}: {})", si(peak, "FLOP/s"),
                                            dtype_name(f.peak_dtype), peaks.name, peaks.source);
  const StepTiming* recorded = nullptr;
  for (const StepTiming& s : f.steps)
    if (s.step == in.step) recorded = &s;
  const double window = in.step_launches.empty() ? 0
                                                 : in.step_launches.back().record.end_us -
                                                       in.step_launches.front().record.start_us;
  const double recorded_ms = recorded ? recorded->ms : window / 1e3;
  const double busy = busy_us(in.step_launches) / 1e3;
  nlohmann::json cards = nlohmann::json::array();
  cards.push_back(card("model", "model", 0, f.model, "the model's configuration"));
  cards.push_back(card("device", "device", 0, f.device, peaks.source));
  cards.push_back(card("dtype", "dtype", 0, f.dtype, "the dtype forward and backward compute in"));
  if (!f.steps.empty() && f.tokens_per_step > 0)
    cards.push_back(card("tokens_per_s", "tokens/s", tokens_per_s, si(tokens_per_s, "tok/s"),
                         fmt::format("tokens per step ({}) / step time; {}. Each step's value is "
                                     "the --metrics field tokens_per_s.",
                                     f.tokens_per_step, which)));
  if (!f.steps.empty())
    cards.push_back(card("ms_per_step", "ms/step", step_ms, fmt::format("{:.2f} ms", step_ms),
                         "wall time of a step on the host, from reading its batch to reading "
                         "its loss; " +
                             which));
  if (f.model_flops_per_token > 0 && !f.steps.empty()) {
    const double mfu = f.model_flops_per_token * tokens_per_s / peak;
    cards.push_back(card("mfu", "MFU", mfu, fmt::format("{:.2f}%", 100 * mfu),
                         fmt::format("model FLOPs per token {} x tokens/s {} / {}. {}",
                                     si(f.model_flops_per_token, "FLOP"), si(tokens_per_s, ""),
                                     peak_text, f.mfu_formula)));
  }
  if (step_ms > 0) {
    const double hfu = step_flops / (step_ms / 1e3) / peak;
    cards.push_back(card("hfu", "HFU", hfu, fmt::format("{:.2f}%", 100 * hfu),
                         fmt::format("hardware FLOPs: the FLOPs every launch of step {} counted "
                                     "({}, recomputation included) / step time {:.2f} ms / {}",
                                     in.step, si(step_flops, "FLOP"), step_ms, peak_text)));
  }
  if (recorded_ms > 0)
    cards.push_back(card("busy", "kernel-busy / step", busy / recorded_ms,
                         fmt::format("{:.1f}%", 100 * busy / recorded_ms),
                         fmt::format("step {}: time some kernel ran ({:.2f} ms, the union of the "
                                     "launches) / the step's wall time ({:.2f} ms). The course's "
                                     "utilization: what nvidia-smi calls GPU utilization. It is "
                                     "not MFU: a busy GPU may do few useful FLOPs.",
                                     in.step, busy, recorded_ms)));
  cards.push_back(card("peak_allocated", "peak allocated", double(f.peak_allocated_bytes),
                       fmt::format("{:.1f} MiB", f.peak_allocated_bytes / MiB),
                       "the most bytes held by live tensors at once over the run "
                       "(allocator, size-class rounded)"));
  cards.push_back(card("peak_reserved", "peak reserved", double(f.peak_reserved_bytes),
                       fmt::format("{:.1f} MiB", f.peak_reserved_bytes / MiB),
                       "the most bytes obtained from the device at once: live tensors plus the "
                       "allocator's cache of freed blocks"));
  cards.push_back(card("launches", "launches / step", double(in.step_launches.size()),
                       std::to_string(in.step_launches.size()),
                       fmt::format("kernel launches in step {}", in.step)));
  if (recorded)
    cards.push_back(card("host_syncs", "host syncs", double(recorded->host_syncs),
                         std::to_string(recorded->host_syncs),
                         fmt::format("times the host waited for the device in step {} (each "
                                     "wait drains the queue the GPU runs ahead on; 0 on cpu)",
                                     in.step)));
  return cards;
}

// The timeline's zero: the step's first launch, or its first host span when that came earlier
// (the batch is read before forward launches anything).
double step_origin_us(const ReportInputs& in) {
  double t0 = in.step_launches.empty() ? 0 : in.step_launches.front().record.start_us;
  for (const HostSpan& h : in.host_spans) t0 = std::min(t0, h.start_us);
  return t0;
}

nlohmann::json host_spans_json(const ReportInputs& in) {
  const double t0 = step_origin_us(in);
  nlohmann::json out = nlohmann::json::array();
  for (const HostSpan& h : in.host_spans)
    out.push_back({{"name", h.name},
                   {"phase", h.phase},
                   {"start", h.start_us - t0},
                   {"dur", h.end_us - h.start_us}});
  return out;
}

nlohmann::json launches_json(const ReportInputs& in, double& step_flops) {
  const DevicePeaks& peaks = in.kernels.peaks;
  nlohmann::json out = nlohmann::json::array();
  const double t0 = step_origin_us(in);
  step_flops = 0;
  for (const TracedLaunch& l : in.step_launches) {
    const LaunchInfo& info = l.record.info;
    step_flops += info.flops;
    const RooflinePoint roof = roofline(OpCost{info.flops, info.bytes},
                                        unit_roof_flops(peaks, info.unit), peaks.bytes_per_s);
    out.push_back({{"kernel", info.kernel},
                   {"op", info.op},
                   {"module", info.module},
                   {"shapes", info.shapes},
                   {"dtype", info.dtype},
                   {"node", info.node_id},
                   {"phase", phase_name(info.phase)},
                   {"unit", compute_unit_name(info.unit)},
                   {"start", l.record.start_us - t0},
                   {"dur", l.record.end_us - l.record.start_us},
                   {"flops", info.flops},
                   {"bytes", info.bytes},
                   {"bound", info.flops > 0 ? roof.bound() : "memory"},
                   {"allocated", l.allocated_bytes},
                   {"reserved", l.reserved_bytes}});
  }
  return out;
}

nlohmann::json tape_json(const std::vector<TapeNode>& tape) {
  nlohmann::json out = nlohmann::json::array();
  for (const TapeNode& n : tape) {
    nlohmann::json inputs = nlohmann::json::array();
    int64_t saved = 0;
    for (const TapeInput& i : n.inputs) {
      if (i.node >= 0)
        inputs.push_back(i.node);
      else
        inputs.push_back(i.leaf.empty() ? "-" : i.leaf);
    }
    for (const TapeSaved& s : n.saved) saved += s.bytes;
    out.push_back({{"id", n.id},
                   {"op", n.op},
                   {"shape", n.out_shape},
                   {"module", n.module},
                   {"site", n.site},
                   {"inputs", inputs},
                   {"saved_bytes", saved},
                   {"grad_norm", n.grad_norm ? nlohmann::json(*n.grad_norm) : nlohmann::json()}});
  }
  return out;
}

nlohmann::json ledger_json(const ReportInputs& in) {
  nlohmann::json j = {{"categories", kLedgerCategories}};
  if (in.facts.predicted_peak_bytes) {
    j["predicted_peak"] = *in.facts.predicted_peak_bytes;
    j["predicted_source"] = in.facts.predicted_source;
  }
  if (!in.ledger) return j;
  j["bytes"] = in.ledger->bytes;
  j["peak"] = in.ledger->peak;
  nlohmann::json largest = nlohmann::json::array();
  for (const LiveTensor& t : in.ledger->largest_at_peak)
    largest.push_back({{"bytes", t.bytes},
                       {"category", t.category},
                       {"tensor", t.tensor},
                       {"op", t.op},
                       {"module", t.module},
                       {"node", t.node}});
  j["largest"] = largest;
  return j;
}

// Roofline points: one per kernel and phase of the recorded step (self time, as the table's), and
// the kernels without FLOPs, which have no intensity, listed with their bytes and bandwidth.
nlohmann::json roofline_json(const ReportInputs& in) {
  const DevicePeaks& peaks = in.kernels.peaks;
  std::map<std::string, std::vector<TracedLaunch>> by_phase;
  for (const TracedLaunch& l : in.step_launches)
    by_phase[phase_name(l.record.info.phase)].push_back(l);
  const DeviceKind device = in.kernels.device;
  nlohmann::json points = nlohmann::json::array(), movers = nlohmann::json::array();
  for (const auto& [phase, ls] : by_phase) {
    const KernelSummary s = summarize_kernels(ls, peaks);
    for (const KernelRow& r : s.rows) {
      // the roof of the units its calls ran on (one unit: that unit's), as the table judges it
      nlohmann::json p = {{"kernel", r.kernel},
                          {"phase", phase},
                          {"calls", r.calls},
                          {"self_us", r.self_us},
                          {"flops", r.flops},
                          {"bytes", r.bytes},
                          {"gbps", r.gbps},
                          {"gflops", r.gflops},
                          {"unit", compute_unit_name(r.unit)},
                          {"unit_label", compute_unit_label(r.unit, device)},
                          {"roof_gflops", r.roof.ridge * peaks.bytes_per_s / 1e9}};
      (r.flops > 0 && r.bytes > 0 ? points : movers).push_back(p);
    }
  }
  nlohmann::json roofs = nlohmann::json::object(), labels = nlohmann::json::object();
  for (ComputeUnit u :
       {ComputeUnit::cuda_core, ComputeUnit::tensor_core_bf16, ComputeUnit::tensor_core_tf32})
    if (unit_peak_flops(peaks, u) > 0) {
      roofs[compute_unit_name(u)] = unit_peak_flops(peaks, u) / 1e9;
      labels[compute_unit_name(u)] = compute_unit_label(u, device);
    }
  nlohmann::json j = {{"points", points},
                      {"memory_only", movers},
                      {"roofs_gflops", roofs},
                      {"roof_labels", labels},
                      {"bandwidth_gbps", peaks.bytes_per_s / 1e9},
                      {"source", peaks.source}};
  if (peaks.attainable_f32_flops > 0) {
    j["attainable_gflops"] = peaks.attainable_f32_flops / 1e9;
    j["attainable_source"] = peaks.attainable_source;
  }
  return j;
}

nlohmann::json kernels_json(const KernelSummary& s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const KernelRow& r : s.rows)
    rows.push_back({{"kernel", r.kernel},
                    {"calls", r.calls},
                    {"self_us", r.self_us},
                    {"total_us", r.total_us},
                    {"share", r.share},
                    {"gbps", r.gbps},
                    {"gflops", r.gflops},
                    {"intensity", r.roof.intensity},
                    {"bound", r.flops > 0 ? r.roof.bound() : "memory"},
                    {"over_floor", r.over_floor}});
  return rows;
}

nlohmann::json curve(const std::vector<std::pair<double, double>>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [x, y] : points) out.push_back({x, y});
  return out;
}

// JSON inside <script>: "</" would end the element early; "<\/" is the same JSON string.
std::string script_safe(std::string s) {
  for (size_t i = s.find("</"); i != std::string::npos; i = s.find("</", i + 3))
    s.replace(i, 2, "<\\/");
  return s;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

nlohmann::json report_data(const ReportInputs& in) {
  double step_flops = 0;
  nlohmann::json launches = launches_json(in, step_flops);
  return {{"title", in.title},
          {"notes", in.notes},
          {"step", in.step},
          {"summary", summary(in, step_flops)},
          {"launches", std::move(launches)},
          {"host_spans", host_spans_json(in)},
          {"tape", tape_json(in.tape)},
          {"ledger", ledger_json(in)},
          {"roofline", roofline_json(in)},
          {"kernels", kernels_json(in.kernels)},
          {"kernels_window_us", in.kernels.window_us},
          {"loss", {{"train", curve(in.train_loss)}, {"val", curve(in.val_loss)}}}};
}

std::string render_report(const ReportInputs& in) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>{}</title>\n"
      "<style>\n{}</style>\n</head>\n<body>\n"
      "<noscript>The step explorer draws with JavaScript; its data is in the script element "
      "glass-data below.</noscript>\n"
      "<script type=\"application/json\" id=\"glass-data\">{}</script>\n"
      "<script>\n{}</script>\n</body></html>\n",
      html_escape(in.title), assets::explorer_css, script_safe(report_data(in).dump()),
      assets::explorer_js);
}

}  // namespace glass::train
