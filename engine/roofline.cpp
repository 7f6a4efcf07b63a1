#include "engine/roofline.h"

#include <algorithm>

#include "engine/error.h"

namespace glass {

OpCost gemm_cost(int64_t m, int64_t k, int64_t n, DType dtype) {
  GLASS_CHECK(m > 0 && k > 0 && n > 0, "gemm_cost: sizes M={} K={} N={} must be positive", m, k, n);
  const double M = static_cast<double>(m), K = static_cast<double>(k), N = static_cast<double>(n);
  const double b = static_cast<double>(dtype_size(dtype));
  return {2 * M * K * N, b * (M * K + K * N + M * N)};
}

AttentionCost attention_cost(int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim,
                             DType dtype, int64_t tile_rows) {
  GLASS_CHECK(batch > 0 && heads > 0 && seq_len > 0 && head_dim > 0 && tile_rows > 0,
              "attention_cost: batch={} heads={} seq_len={} head_dim={} tile_rows={} must be "
              "positive",
              batch, heads, seq_len, head_dim, tile_rows);
  const double BH = static_cast<double>(batch * heads), T = static_cast<double>(seq_len);
  const double D = static_cast<double>(head_dim), b = static_cast<double>(dtype_size(dtype));
  const double entries = BH * T * (T + 1) / 2;
  double keys = 0;  // rows of K (and of V) the query tiles read
  for (int64_t q0 = 0; q0 < seq_len; q0 += tile_rows)
    keys += static_cast<double>(std::min(seq_len, q0 + tile_rows));
  AttentionCost c;
  c.naive = {entries * (4 * D + 5), b * BH * (4 * T * D + 4 * T * T)};
  c.flash = {c.naive.flops, b * BH * D * (2 * T + 2 * keys) + 4 * BH * T};
  c.naive_memory_bytes = b * BH * T * T;
  c.flash_memory_bytes = 4 * BH * T;
  return c;
}

OpCost elementwise_cost(int64_t n, int inputs, int outputs, double flops_per_element, DType dtype) {
  GLASS_CHECK(n > 0 && inputs >= 0 && outputs > 0 && flops_per_element >= 0,
              "elementwise_cost: n={} inputs={} outputs={} flops/element={} (need n > 0, "
              "outputs > 0)",
              n, inputs, outputs, flops_per_element);
  const double N = static_cast<double>(n);
  return {N * flops_per_element,
          static_cast<double>(dtype_size(dtype)) * N * static_cast<double>(inputs + outputs)};
}

RooflinePoint roofline(const OpCost& cost, double peak_flops, double peak_bytes_per_s) {
  GLASS_CHECK(peak_flops > 0 && peak_bytes_per_s > 0,
              "roofline: peaks must be positive ({} FLOP/s, {} B/s)", peak_flops, peak_bytes_per_s);
  RooflinePoint p;
  p.intensity = cost.intensity();
  p.ridge = peak_flops / peak_bytes_per_s;
  p.memory_bound = p.intensity < p.ridge;
  p.floor_s = std::max(cost.flops / peak_flops, cost.bytes / peak_bytes_per_s);
  return p;
}

double unit_peak_flops(const DevicePeaks& peaks, ComputeUnit unit) {
  switch (unit) {
    case ComputeUnit::tensor_core_bf16:
      return peaks.bf16_flops;
    case ComputeUnit::tensor_core_tf32:
      return peaks.tf32_flops;
    case ComputeUnit::cuda_core:
    case ComputeUnit::memory:
      break;
  }
  return peaks.f32_flops;
}

double unit_roof_flops(const DevicePeaks& peaks, ComputeUnit unit) {
  const double p = unit_peak_flops(peaks, unit);
  return p > 0 ? p : peaks.f32_flops;
}

double launch_bound_s(const LaunchInfo& launch, const DevicePeaks& peaks) {
  GLASS_CHECK(peaks.bytes_per_s > 0, "device '{}' has no bandwidth ({})", peaks.name, peaks.source);
  double compute = 0;
  if (launch.flops > 0) {
    const double peak = unit_peak_flops(peaks, launch.unit);
    GLASS_CHECK(peak > 0, "launch '{}' does {} FLOPs on {}, for which device '{}' has no peak ({})",
                launch.kernel, launch.flops, compute_unit_name(launch.unit), peaks.name,
                peaks.source);
    compute = launch.flops / peak;
  }
  return std::max(compute, launch.bytes / peaks.bytes_per_s);
}

}  // namespace glass
