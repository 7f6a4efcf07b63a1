#include "train/report.h"

#include <fmt/format.h>

#include <algorithm>

#include "train/svg.h"

namespace glass::train {

namespace {

constexpr size_t kMostBars = 24;

std::string loss_plot(const ReportInputs& in) {
  return svg_plot("Loss", {"step"}, {"cross-entropy"},
                  {{"train", "#4878d0", in.train_loss},
                   {"validation", "#ee854a", in.val_loss, in.val_loss.size() > 1}});
}

std::string kernel_bars(const KernelSummary& s) {
  std::vector<std::pair<std::string, double>> bars;
  for (const KernelRow& r : s.rows) {
    if (bars.size() == kMostBars) break;
    bars.emplace_back(r.kernel, r.self_us / 1e3);
  }
  return svg_bars(fmt::format("Self time per kernel (top {}, recorded steps)", bars.size()), bars,
                  "ms");
}

// Achieved FLOP/s against intensity on log-log axes, under the roof min(peak, bandwidth x I): the
// hardware's, and, where the device has one, the lower roof of its measured GEMM ("attainable").
// Each point carries its row number in the per-kernel table; the key below the plot names them.
std::string roofline_plot(const KernelSummary& s) {
  const double peak = s.peaks.flops(s.dtype) / 1e9, ridge = s.peaks.ridge(s.dtype);
  const double bandwidth = s.peaks.bytes_per_s / 1e9;  // GB/s: GFLOP/s per FLOP/byte
  const double attainable = s.dtype == DType::f32 && s.peaks.attainable_f32_flops > 0
                                ? s.peaks.attainable_f32_flops / 1e9
                                : 0;
  double lo = ridge / 10, hi = ridge * 10;
  Series points("kernels", "#d65f5f", {}, false);
  std::string key;
  for (size_t i = 0; i < s.rows.size(); ++i) {
    const KernelRow& r = s.rows[i];
    if (r.flops <= 0 || r.bytes <= 0 || r.gflops <= 0) continue;
    lo = std::min(lo, r.roof.intensity / 2);
    hi = std::max(hi, r.roof.intensity * 2);
    points.points.emplace_back(r.roof.intensity, r.gflops);
    const std::string text = fmt::format("{}: {:.3g} FLOP/B, {:.3g} GFLOP/s, {} calls", r.kernel,
                                         r.roof.intensity, r.gflops, r.calls);
    points.labels.push_back(text);
    points.tags.push_back(std::to_string(i + 1));
    key += fmt::format("<li value=\"{}\">{}</li>", i + 1, html_escape(text));
  }
  std::vector<Series> series;
  Series roof("hardware roof", "#333", {{lo, bandwidth * lo}, {ridge, peak}, {hi, peak}});
  roof.tags = {"", fmt::format("hardware peak {:.4g} GFLOP/s", peak), ""};
  series.push_back(roof);
  if (attainable > 0 && attainable < peak) {
    const double knee = attainable / bandwidth;
    Series measured("attainable", "#6acc64", {{knee, attainable}, {hi, attainable}});
    measured.tags = {fmt::format("attainable {:.4g} GFLOP/s (measured GEMM)", attainable), ""};
    series.push_back(measured);
  }
  series.push_back(points);
  return svg_plot("Roofline", {"arithmetic intensity (FLOP/byte)", true},
                  {"achieved GFLOP/s", true}, series) +
         "<p>Points are numbered by their row in the per-kernel table above:</p><ol "
         "class=\"key\">" +
         key + "</ol>\n";
}

std::string memory_plot(const std::vector<TracedLaunch>& ls) {
  constexpr double MiB = 1 << 20;
  Series allocated("allocated", "#4878d0"), reserved("reserved", "#6acc64");
  const double t0 = ls.empty() ? 0 : ls.front().record.start_us;
  for (const TracedLaunch& l : ls) {
    const double ms = (l.record.end_us - t0) / 1e3;
    allocated.points.emplace_back(ms, static_cast<double>(l.allocated_bytes) / MiB);
    reserved.points.emplace_back(ms, static_cast<double>(l.reserved_bytes) / MiB);
  }
  return svg_plot("Memory over one step (after each launch)", {"ms since the step's first launch"},
                  {"MiB", false, true}, {allocated, reserved});
}

}  // namespace

std::string render_report(const ReportInputs& in) {
  std::string notes;
  for (const std::string& n : in.notes) notes += "<p>" + html_escape(n) + "</p>\n";
  return fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em;max-width:1100px}}"
      "section{{margin:1.5em 0}}pre{{font-size:11px;overflow-x:auto}}</style></head>\n"
      "<body>\n<h1>{0}</h1>\n{1}"
      "<section id=\"loss\"><h2>Loss</h2>\n{2}</section>\n"
      "<section id=\"kernels\"><h2>Time per kernel</h2>\n{3}<pre>{4}</pre></section>\n"
      "<section id=\"roofline\"><h2>Roofline</h2>\n{5}</section>\n"
      "<section id=\"memory\"><h2>Memory</h2>\n{6}</section>\n</body></html>\n",
      html_escape(in.title), notes, loss_plot(in), kernel_bars(in.kernels),
      html_escape(in.kernels.table()), roofline_plot(in.kernels), memory_plot(in.step_launches));
}

}  // namespace glass::train
