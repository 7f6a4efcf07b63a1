#include "kernels/peaks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>

#include "engine/allocator.h"
#include "engine/tensor.h"
#include "kernels/backend.h"
#include "kernels/cpu/hardware_peak.h"
#include "kernels/cpu/threads.h"

namespace glass::kernels {

namespace {

constexpr int kRuns = 10;

// The shortest of kRuns timings of `work` on `d`, in seconds, the device synchronised around it,
// after one untimed run that pays for what later runs find ready (the GEMM's per-thread packing
// buffers, pages touched for the first time, the thread pool). On a shared host a measurement
// moves with the neighbours' load: best of 3 put glass's sgemm 512^3 at 280-330 GFLOP/s at
// train_gpt's start while the step's GEMMs ran at 358; more runs find more of the quiet moments.
// A timing covers `reps` back-to-back runs (divided out): a 256 KiB copy takes a few microseconds,
// the clock's and the launch's own cost would otherwise be most of it.
template <class Work>
double best_seconds(Device d, Work&& work, int reps = 1) {
  synchronize(d);
  work();
  double best = 1e30;
  for (int i = 0; i < kRuns; ++i) {
    synchronize(d);
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) work();
    synchronize(d);
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  return best;
}

// A copy of `bytes` from one buffer to another on `d` (counted twice: read and write), in bytes
// per second, the best of kRuns timings of `reps` copies each. Both buffers are written first, so
// no page is touched for the first time inside a timing.
double copy_bytes_per_s(Device d, size_t bytes, int reps) {
  const Backend& be = backend(d);
  const int64_t floats = static_cast<int64_t>(bytes / 4);
  const Tensor src = Tensor::empty({floats}, DType::f32, d),
               dst = Tensor::empty({floats}, DType::f32, d);
  be.fill(src, 1.0);
  be.fill(dst, 0.0);
  const double s = best_seconds(
      d, [&] { be.copy(src, dst); }, reps);
  return 2.0 * static_cast<double>(floats) * 4 / s;
}

// The 1-minute load average (/proc/loadavg); -1 where there is none.
double load_average_1min() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  in >> load;
  return in ? load : -1;
}

// CPU time of the calling thread, in seconds.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The datasheet row whose name ("h200") the driver's name ("NVIDIA H200") contains.
std::optional<DevicePeaks> datasheet_row(const std::string& gpu) {
  std::string lower = gpu;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const DevicePeaks& row : known_gpus())
    if (lower.find(row.name) != std::string::npos) return row;
  return std::nullopt;
}

DevicePeaks gpu_peaks(Device d) {
  const std::string gpu = device_name(d);
  if (std::optional<DevicePeaks> row = datasheet_row(gpu)) {
    row->source += " (driver: " + gpu + ")";
    return *row;
  }
  DevicePeaks p = measure_device_peaks(d);
  p.source += fmt::format(" ({} has no datasheet row in engine/device_peaks.cpp)", gpu);
  return p;
}

// The GEMM and copy rates on `d` (measure_device_peaks).
DevicePeaks measure_gemm_and_copy(Device d, int n, size_t copy_bytes) {
  const Backend& be = backend(d);
  const Tensor a = Tensor::empty({n, n}, DType::f32, d), b = Tensor::empty({n, n}, DType::f32, d);
  const Tensor c = Tensor::empty({n, n}, DType::f32, d);
  be.fill(a, 1.0);
  be.fill(b, 0.5);
  GemmArgs g;
  g.a = a, g.b = b, g.c = c;
  g.m = g.n = g.k = n;
  g.lda = g.ldb = g.ldc = n;
  const double gemm_s = best_seconds(d, [&] { be.gemm(g); });
  const int64_t floats = static_cast<int64_t>(copy_bytes / 4);
  DevicePeaks p;
  p.name = d.str();
  p.f32_flops = 2.0 * n * n * static_cast<double>(n) / gemm_s;
  p.bytes_per_s = copy_bytes_per_s(d, copy_bytes, 1);
  p.source =
      fmt::format("measured on {}{}: f32 GEMM {}^3 and a {} MiB copy (best of {})", device_name(d),
                  d.kind == DeviceKind::cpu ? fmt::format(" with {} threads", cpu::num_threads())
                                            : std::string(),
                  n, (floats * 4) >> 20, kRuns);
  return p;
}

}  // namespace

DevicePeaks measure_device_peaks(Device d, int n, size_t copy_bytes) {
  // The probe's tensors are not the program's: the allocator's peaks are left as they were.
  Allocator& allocator = Allocator::for_device(d);
  const AllocatorStats before = allocator.stats();
  DevicePeaks p = measure_gemm_and_copy(d, n, copy_bytes);
  allocator.restore_peaks(before);
  return p;
}

// The host: FLOP/s from the hardware (cores x clock x FLOPs per cycle), the bandwidth and the
// attainable GEMM rate measured once (glass's own sgemm, the fastest f32 math the engine has, and
// the cpu copy kernel). The measured GEMM is the second roof, never the peak.
// The bandwidth roof is the faster of a 32 MiB copy (main memory or a large last-level cache) and
// a 256 KiB copy (the per-core L2): the kernels' activations at the default model's sizes stay in
// cache, so a main-memory roof alone would show them above it. The small copy is timed kSmallReps
// copies at a time: one takes ~5 us, where a lone timing read mostly the clock and the launch.
// The measured figures fall when other processes hold the cores, so the line says whether the
// machine was busy while they were taken (measurement_load_note).
DevicePeaks host_peaks() {
  constexpr int kSmallReps = 64;
  const cpu::HardwarePeak& hw = cpu::hardware_peak();
  const double wall0 =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const double cpu0 = thread_cpu_seconds();
  const double stalled0 = cpu::cpu_stall_seconds_now();
  Allocator& allocator = Allocator::for_device(kCPU);
  const AllocatorStats before = allocator.stats();  // the probes leave no peak (as below)
  DevicePeaks p = measure_gemm_and_copy(kCPU, 512, size_t{32} << 20);
  const double large_copy = p.bytes_per_s;
  const double small_copy = copy_bytes_per_s(kCPU, size_t{256} << 10, kSmallReps);
  allocator.restore_peaks(before);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count() -
      wall0;
  const double cpu_share = wall > 0 ? (thread_cpu_seconds() - cpu0) / wall : 1.0;
  const double stalled1 = cpu::cpu_stall_seconds_now();
  const double waiting_cores =
      stalled0 >= 0 && stalled1 >= 0 && wall > 0 ? (stalled1 - stalled0) / wall * hw.cores : -1;
  p.bytes_per_s = std::max(large_copy, small_copy);
  p.attainable_f32_flops = p.f32_flops;
  p.attainable_source = "glass sgemm 512^3 (kernels/cpu/sgemm.cpp), " + p.source;
  p.f32_flops = hw.flops();
  p.source = fmt::format(
      "hardware peak {}; bandwidth: the faster copy of 32 MiB ({:.1f} GB/s) and 256 KiB ({:.1f} "
      "GB/s, {} copies per timing); attainable (measured) {:.1f} GFLOP/s: {}; {}",
      hw.derivation(), large_copy / 1e9, small_copy / 1e9, kSmallReps, p.attainable_f32_flops / 1e9,
      p.attainable_source,
      measurement_load_note(cpu_share, load_average_1min(), hw.cores, waiting_cores));
  return p;
}

bool measurement_was_busy(double cpu_share, double waiting_cores) {
  return waiting_cores >= 0 ? waiting_cores > cpu::kBusyWaitingCores : cpu_share < kQuietCpuShare;
}

std::string measurement_load_note(double cpu_share, double load_1min, int cores,
                                  double waiting_cores) {
  const std::string load =
      load_1min >= 0 ? fmt::format("; 1-min load average {:.1f} on {} cores", load_1min, cores)
                     : std::string();
  std::string evidence =
      fmt::format("the measuring thread ran {:.0f}% of the time", 100 * std::min(cpu_share, 1.0));
  if (waiting_cores >= 0)
    evidence = fmt::format(
        "{:.2f} cores on average had a thread waiting for them (Linux's CPU pressure); {}",
        waiting_cores, evidence);
  if (!measurement_was_busy(cpu_share, waiting_cores))
    return fmt::format("machine quiet during the measurement ({}{})", evidence, load);
  return fmt::format(
      "MACHINE BUSY during the measurement: {} (other processes held the cores{}), so the "
      "measured bandwidth and GEMM rate read low; the hardware peak is not measured and stands",
      evidence, load);
}

DevicePeaks peaks_for(Device d) {
  if (d.kind != DeviceKind::cuda) {
    static const DevicePeaks host = host_peaks();
    DevicePeaks p = host;
    p.name = d.str();
    if (d.kind == DeviceKind::emu) p.source = "emu runs on the host, " + p.source;
    // cpu's own bf16 GEMMs use vdpbf16ps where the core has it (kernels/cpu/hardware_peak.h);
    // emu's bf16 GEMMs widen to f32 on the host, so emu has no bf16 peak
    const cpu::HardwarePeak& hw = cpu::hardware_peak();
    if (d.kind == DeviceKind::cpu && hw.bf16_flops() > 0) {
      p.bf16_flops = hw.bf16_flops();
      p.source += fmt::format(
          "; bf16 peak {:.1f} GFLOP/s: AVX512-BF16's vdpbf16ps does two bf16 products per f32 "
          "lane where an FMA does one (2x the f32 peak)",
          p.bf16_flops / 1e9);
    }
    return p;
  }
  // Once per GPU: a measurement takes a moment, and every report should print the same numbers.
  static std::mutex mu;
  static std::map<int, DevicePeaks> known;
  const std::lock_guard lock(mu);
  auto it = known.find(d.index);
  if (it == known.end()) it = known.emplace(d.index, gpu_peaks(d)).first;
  return it->second;
}

}  // namespace glass::kernels
