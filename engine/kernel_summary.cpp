#include "engine/kernel_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <vector>

namespace glass {

namespace {

double duration(const TracedLaunch& l) { return l.record.end_us - l.record.start_us; }

// Time spent in launches nested directly inside each launch (same thread, inside its interval),
// indexed like `ls`. A stack of the launches still open at each start finds the direct parent.
std::vector<double> child_time(const std::vector<TracedLaunch>& ls) {
  std::vector<size_t> order(ls.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& ra = ls[a].record;
    const auto& rb = ls[b].record;
    if (ls[a].tid != ls[b].tid) return ls[a].tid < ls[b].tid;
    if (ra.start_us != rb.start_us) return ra.start_us < rb.start_us;
    return ra.end_us > rb.end_us;  // the outer one first when they start together
  });
  std::vector<double> child(ls.size(), 0);
  std::vector<size_t> open;
  for (size_t k = 0; k < order.size(); ++k) {
    const TracedLaunch& l = ls[order[k]];
    while (!open.empty() &&
           (ls[open.back()].tid != l.tid || ls[open.back()].record.end_us <= l.record.start_us))
      open.pop_back();
    if (!open.empty()) child[open.back()] += duration(l);
    open.push_back(order[k]);
  }
  return child;
}

// Per step, first start to last end; launches outside steps count as one window of their own.
double window_us(const std::vector<TracedLaunch>& ls) {
  std::map<int64_t, std::pair<double, double>> span;
  for (const TracedLaunch& l : ls) {
    auto [it, added] = span.try_emplace(l.step, l.record.start_us, l.record.end_us);
    it->second.first = std::min(it->second.first, l.record.start_us);
    it->second.second = std::max(it->second.second, l.record.end_us);
  }
  double total = 0;
  for (const auto& [step, s] : span) total += s.second - s.first;
  return total;
}

}  // namespace

KernelSummary summarize_kernels(const std::vector<TracedLaunch>& launches,
                                const DevicePeaks& peaks) {
  KernelSummary s;
  s.peaks = peaks;
  if (!launches.empty()) s.device = launches.front().record.info.device.kind;
  s.window_us = window_us(launches);
  const std::vector<double> child = child_time(launches);
  std::map<std::string, KernelRow> by_name;
  std::map<std::string, std::map<ComputeUnit, double>> flops_by_unit;  // per kernel
  for (size_t i = 0; i < launches.size(); ++i) {
    const LaunchInfo& info = launches[i].record.info;
    KernelRow& row = by_name[info.kernel];
    row.kernel = info.kernel;
    row.calls++;
    row.total_us += duration(launches[i]);
    row.self_us += duration(launches[i]) - child[i];
    row.flops += info.flops;
    row.bytes += info.bytes;
    flops_by_unit[info.kernel][info.unit] += info.flops;
  }
  for (auto& [name, row] : by_name) {
    row.share = s.window_us > 0 ? row.self_us / s.window_us : 0;
    // bytes/µs = MB/s and FLOP/µs = MFLOP/s: /1e3 gives G.
    row.gbps = row.self_us > 0 ? row.bytes / row.self_us / 1e3 : 0;
    row.gflops = row.self_us > 0 ? row.flops / row.self_us / 1e3 : 0;
    // the calls' combined roof: their FLOPs over the least time their units need for them
    const auto& units = flops_by_unit[name];
    double compute_s = 0;
    for (const auto& [unit, flops] : units) compute_s += flops / unit_roof_flops(peaks, unit);
    const double roof_flops = row.flops > 0 ? row.flops / compute_s : peaks.f32_flops;
    row.roof = roofline(OpCost{row.flops, row.bytes}, roof_flops, peaks.bytes_per_s);
    row.over_floor = row.roof.floor_s > 0 ? row.self_us * 1e-6 / row.roof.floor_s : 0;
    row.unit = std::max_element(units.begin(), units.end(), [](const auto& a, const auto& b) {
                 return a.second < b.second;
               })->first;
    s.rows.push_back(row);
  }
  std::sort(s.rows.begin(), s.rows.end(), [](const KernelRow& a, const KernelRow& b) {
    return a.self_us != b.self_us ? a.self_us > b.self_us : a.kernel < b.kernel;
  });
  s.occupancy = launch_occupancy(launches, kernel_resource_report());
  return s;
}

std::string KernelSummary::table() const {
  // the f32 roof, and the roof of each other unit that some kernel's FLOPs ran on; with more
  // than one, each named by its unit
  std::vector<ComputeUnit> units = {ComputeUnit::cuda_core};
  for (const ComputeUnit u : {ComputeUnit::tensor_core_bf16, ComputeUnit::tensor_core_tf32})
    if (unit_peak_flops(peaks, u) > 0 &&
        std::any_of(rows.begin(), rows.end(),
                    [&](const KernelRow& r) { return r.unit == u && r.flops > 0; }))
      units.push_back(u);
  const bool several = units.size() > 1;
  std::string roofs, ridges;
  for (const ComputeUnit u : units) {
    const double roof = unit_roof_flops(peaks, u);
    roofs += fmt::format("{}{:.1f} GFLOP/s {}", roofs.empty() ? "" : ", ", roof / 1e9,
                         several ? compute_unit_label(u, device) : "f32");
    ridges += fmt::format("{}{:.1f}", ridges.empty() ? "" : " and ", roof / peaks.bytes_per_s);
  }
  std::string out = fmt::format(
      "peaks ({}): {}, {:.1f} GB/s, ridge{} {} FLOP/byte{}; source: {}\n", peaks.name, roofs,
      peaks.bytes_per_s / 1e9, several ? "s" : "", ridges,
      several ? " (each kernel against the roof of the unit its FLOPs ran on)" : "", peaks.source);
  if (peaks.attainable_f32_flops > 0)
    out += fmt::format("attainable (measured, a second roof, not the peak): {:.1f} GFLOP/s f32\n",
                       peaks.attainable_f32_flops / 1e9);
  out += fmt::format("{:<28} {:>6} {:>10} {:>10} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8}\n", "kernel",
                     "calls", "self ms", "total ms", "share", "GB/s", "GFLOP/s", "FLOP/B", "bound",
                     "x floor");
  for (const KernelRow& r : rows)
    out += fmt::format(
        "{:<28} {:>6} {:>10.3f} {:>10.3f} {:>5.1f}% {:>9.2f} {:>9.2f} {:>8.2f} {:>8} {:>8.1f}\n",
        r.kernel, r.calls, r.self_us / 1e3, r.total_us / 1e3, 100 * r.share, r.gbps, r.gflops,
        r.roof.intensity, r.roof.bound(), r.over_floor);
  std::string above;
  for (const KernelRow& r : rows)
    if (r.over_floor > 0 && r.over_floor < 1) above += (above.empty() ? "" : ", ") + r.kernel;
  if (!above.empty())
    out += fmt::format(
        "above the roof (x floor < 1): {}; the peaks are wrong for them (their counted bytes did "
        "not all move, or came from a cache faster than the bandwidth roof)\n",
        above);
  out += fmt::format("window {:.3f} ms (first launch to last launch of each recorded step)\n",
                     window_us / 1e3);
  if (!occupancy.empty()) out += occupancy_table(occupancy, kernel_resource_report());
  return out;
}

}  // namespace glass
