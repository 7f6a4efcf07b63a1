#include "kernels/cpu/measure_peaks.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/cpu/threads.h"

namespace glass::kernels::cpu {

namespace {

constexpr int kRuns = 3;

// The shortest of kRuns timings of fn, in seconds: the run least disturbed by other work.
template <class Fn>
double best_seconds(Fn&& fn) {
  double best = 1e30;
  for (int i = 0; i < kRuns; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

DevicePeaks measure() {
  constexpr int n = 512;
  std::vector<float> a(size_t{n} * n, 1.0f), b(size_t{n} * n, 0.5f), c(size_t{n} * n);
  const double gemm_s = best_seconds([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
  });
  constexpr size_t copy_bytes = size_t{32} << 20;
  std::vector<char> src(copy_bytes, 1), dst(copy_bytes);
  const double copy_s = best_seconds([&] { std::memcpy(dst.data(), src.data(), copy_bytes); });

  DevicePeaks p;
  p.name = "cpu";
  p.f32_flops = 2.0 * n * n * n / gemm_s;
  p.bytes_per_s = 2.0 * static_cast<double>(copy_bytes) / copy_s;  // read + write
  p.source = fmt::format(
      "measured on this machine with {} threads: sgemm {}^3 and a {} MiB copy (best of {})",
      num_threads(), n, copy_bytes >> 20, kRuns);
  return p;
}

}  // namespace

const DevicePeaks& measured_host_peaks() {
  static const DevicePeaks peaks = measure();
  return peaks;
}

DevicePeaks peaks_for(Device d) {
  DevicePeaks p = measured_host_peaks();
  p.name = d.str();
  if (d.kind == DeviceKind::emu) p.source = "emu runs on the host, " + p.source;
  return p;
}

}  // namespace glass::kernels::cpu
