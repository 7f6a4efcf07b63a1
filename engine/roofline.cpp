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

}  // namespace glass
