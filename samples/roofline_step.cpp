#include "samples/roofline_step.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "engine/device_peaks.h"
#include "engine/error.h"
#include "samples/cli_args.h"
#include "samples/si_units.h"
#include "train/step_plan.h"
#include "train/step_roofline.h"

namespace glass::samples {

namespace {

using train::StepRoofline;

DevicePeaks gpu_peaks(const std::string& name) {
  if (auto p = find_known_gpu(name)) return *p;
  std::string known;
  for (const auto& g : known_gpus()) known += (known.empty() ? "" : ", ") + g.name;
  fail("--gpu '{}': unknown (known: {})", name, known);
}

double ms(double s) { return s * 1e3; }

std::string grid_str(const Dim3& d) { return fmt::format("{}x{}x{}", d.x, d.y, d.z); }

// The launches in order of bound time, largest first (issue order among equals).
std::vector<size_t> by_bound(const StepRoofline& r) {
  std::vector<size_t> order(r.launches.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return r.launches[a].bound_s > r.launches[b].bound_s;
  });
  return order;
}

nlohmann::json launch_json(const StepRoofline& r, size_t i) {
  const train::LaunchBound& l = r.launches[i];
  return {{"index", i},
          {"kernel", l.launch.kernel},
          {"op", l.launch.op},
          {"phase", phase_name(l.launch.phase)},
          {"unit", compute_unit_name(l.launch.unit)},
          {"grid", {l.launch.grid.x, l.launch.grid.y, l.launch.grid.z}},
          {"block", {l.launch.block.x, l.launch.block.y, l.launch.block.z}},
          {"flops", l.launch.flops},
          {"bytes", l.launch.bytes},
          {"bound_ms", ms(l.bound_s)}};
}

void print_json(const RooflineStepFlags& f, const train::RecordedStep& step, const StepRoofline& r,
                double plan_s) {
  nlohmann::json units = nlohmann::json::array(), kernels = nlohmann::json::array(),
                 top = nlohmann::json::array();
  for (const train::UnitBound& u : r.units)
    units.push_back({{"unit", compute_unit_name(u.unit)},
                     {"launches", u.launches},
                     {"flops", u.flops},
                     {"bytes", u.bytes},
                     {"bound_ms", ms(u.bound_s)},
                     {"peak_flops", u.peak_flops}});
  for (const train::KernelBound& k : r.kernels)
    kernels.push_back({{"kernel", k.kernel},
                       {"unit", compute_unit_name(k.unit)},
                       {"launches", k.launches},
                       {"flops", k.flops},
                       {"bytes", k.bytes},
                       {"bound_ms", ms(k.bound_s)}});
  const std::vector<size_t> order = by_bound(r);
  for (size_t n = 0; n < order.size() && n < static_cast<size_t>(f.top); ++n)
    top.push_back(launch_json(r, order[n]));
  nlohmann::json j = {{"gpu", r.peaks.name},
                      {"peaks",
                       {{"bf16_flops", r.peaks.bf16_flops},
                        {"tf32_flops", r.peaks.tf32_flops},
                        {"f32_flops", r.peaks.f32_flops},
                        {"bytes_per_s", r.peaks.bytes_per_s},
                        {"source", r.peaks.source}}},
                      {"model", f.model.empty() ? f.config.str() : f.model},
                      {"config", f.config.str()},
                      {"dtype", f.dtype},
                      {"batch", f.batch},
                      {"seq_len", f.seq_len},
                      {"attention", step.attention},
                      {"tf32", f.tf32},
                      {"plan_s", plan_s},
                      {"model_flops", r.model_flops},
                      {"ideal_ms", ms(r.ideal_s)},
                      {"bound_ms", ms(r.bound_s)},
                      {"bound_over_ideal", r.bound_s / r.ideal_s},
                      {"tensor_core_flop_share", r.tensor_core_flop_share},
                      {"launch_count", r.launches.size()},
                      {"launch_flops", r.flops},
                      {"launch_bytes", r.bytes},
                      {"units", units},
                      {"kernels", kernels},
                      {"top_launches", top},
                      {"memory",
                       {{"state_bytes", step.state_bytes},
                        {"peak_allocated_bytes", step.peak_allocated_bytes},
                        {"peak_reserved_bytes", step.peak_reserved_bytes}}}};
  if (f.every_launch) {
    nlohmann::json all = nlohmann::json::array();
    for (size_t i = 0; i < r.launches.size(); ++i) all.push_back(launch_json(r, i));
    j["launches"] = all;
  }
  fmt::print("{}\n", j.dump(2));
}

void print_launch(const StepRoofline& r, size_t i) {
  const train::LaunchBound& l = r.launches[i];
  fmt::print("  {:>5} {:<30} {:<24} {:<9} {:<16} {:>14} {:>12} {:>12} {:>10.4f}\n", i,
             l.launch.kernel, l.launch.op, phase_name(l.launch.phase),
             compute_unit_name(l.launch.unit), grid_str(l.launch.grid), si(l.launch.flops, "FLOP"),
             si(l.launch.bytes, "B"), ms(l.bound_s));
}

void print_text(const RooflineStepFlags& f, const train::RecordedStep& step, const StepRoofline& r,
                double plan_s) {
  const DevicePeaks& p = r.peaks;
  fmt::print("roofline step: {} | {} | batch {} x seq_len {} | attention {}{} | {}\n",
             f.model.empty() ? f.config.str() : f.model, f.dtype, f.batch, f.seq_len,
             step.attention, f.tf32 ? " | tf32" : "", p.name);
  fmt::print("planned on meta in {:.2f} s: {} launches\n", plan_s, r.launches.size());
  fmt::print("roofs ({}): bf16 Tensor Core {}, TF32 Tensor Core {}, f32 CUDA core {}, memory {}\n",
             p.source, si(p.bf16_flops, "FLOP/s"), si(p.tf32_flops, "FLOP/s"),
             si(p.f32_flops, "FLOP/s"), si(p.bytes_per_s, "B/s"));
  fmt::print("bound per launch = max(FLOPs / roof of its unit, bytes / memory bandwidth)\n\n");
  fmt::print("by kernel, largest bound first:\n");
  fmt::print("  {:<30} {:<16} {:>8} {:>14} {:>12} {:>10} {:>7}\n", "kernel", "unit", "launches",
             "FLOPs", "bytes", "bound ms", "share");
  for (const train::KernelBound& k : r.kernels)
    fmt::print("  {:<30} {:<16} {:>8} {:>14} {:>12} {:>10.4f} {:>6.1f}%\n", k.kernel,
               compute_unit_name(k.unit), k.launches, si(k.flops, "FLOP"), si(k.bytes, "B"),
               ms(k.bound_s), 100 * k.bound_s / r.bound_s);
  fmt::print("\nby unit:\n");
  for (const train::UnitBound& u : r.units)
    fmt::print("  {:<16} {:>5} launches {:>14} {:>12} bound {:>9.4f} ms ({:.1f}%)\n",
               compute_unit_name(u.unit), u.launches, si(u.flops, "FLOP"), si(u.bytes, "B"),
               ms(u.bound_s), r.bound_s > 0 ? 100 * u.bound_s / r.bound_s : 0.0);
  const std::vector<size_t> order = by_bound(r);
  fmt::print("\n{}:\n", f.every_launch ? "every launch, in issue order"
                                       : fmt::format("top {} launches by bound", f.top));
  fmt::print("  {:>5} {:<30} {:<24} {:<9} {:<16} {:>14} {:>12} {:>12} {:>10}\n", "#", "kernel",
             "op", "phase", "unit", "grid", "FLOPs", "bytes", "bound ms");
  if (f.every_launch)
    for (size_t i = 0; i < r.launches.size(); ++i) print_launch(r, i);
  else
    for (size_t n = 0; n < order.size() && n < static_cast<size_t>(f.top); ++n)
      print_launch(r, order[n]);
  fmt::print("\nsummary:\n");
  fmt::print("  model FLOPs (6 N' + 12 L T C) B T   {}\n", si(r.model_flops, "FLOP"));
  fmt::print("  launched FLOPs / bytes              {} / {}\n", si(r.flops, "FLOP"),
             si(r.bytes, "B"));
  fmt::print("  ideal_ms  (model FLOPs at 100% MFU, {} peak)   {:.3f}\n", f.dtype, ms(r.ideal_s));
  fmt::print("  bound_ms  (sum of the launches' bounds)       {:.3f}  ({:.3f} x ideal)\n",
             ms(r.bound_s), r.bound_s / r.ideal_s);
  fmt::print("  tensor_core_flop_share                        {:.4f}\n", r.tensor_core_flop_share);
  constexpr double MiB = 1 << 20;
  fmt::print(
      "memory (meta's allocator, the size classes and cache of cuda's): {:.1f} MiB held before the "
      "step, peak {:.1f} MiB allocated, {:.1f} MiB reserved\n",
      static_cast<double>(step.state_bytes) / MiB,
      static_cast<double>(step.peak_allocated_bytes) / MiB,
      static_cast<double>(step.peak_reserved_bytes) / MiB);
}

}  // namespace

void roofline_step(const RooflineStepFlags& f) {
  GLASS_CHECK(f.top >= 0, "--top {} must be 0 or more", f.top);
  const DevicePeaks peaks = gpu_peaks(f.gpu);
  train::StepPlanOptions o;
  o.config = f.config;
  o.batch = f.batch;
  o.seq_len = f.seq_len;
  o.dtype = parse_dtype_flag(f.dtype);
  o.attention = f.attention;
  o.tf32 = f.tf32;
  const auto t0 = std::chrono::steady_clock::now();
  const train::RecordedStep step = train::record_training_step(kMeta, o);
  const double plan_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const StepRoofline r = train::step_roofline(step, f.config, f.batch, f.seq_len, o.dtype, peaks);
  if (f.json)
    print_json(f, step, r, plan_s);
  else
    print_text(f, step, r, plan_s);
}

}  // namespace glass::samples
