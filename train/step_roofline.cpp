#include "train/step_roofline.h"

#include <algorithm>
#include <map>
#include <utility>

#include "engine/roofline.h"
#include "train/gpt_cost.h"

namespace glass::train {

namespace {

bool is_tensor_core(ComputeUnit u) {
  return u == ComputeUnit::tensor_core_bf16 || u == ComputeUnit::tensor_core_tf32;
}

}  // namespace

StepRoofline step_roofline(const RecordedStep& step, const GPTConfig& config, int64_t batch,
                           int64_t seq_len, DType dtype, const DevicePeaks& peaks) {
  StepRoofline r;
  r.peaks = peaks;
  r.dtype = dtype;
  r.model_flops = gpt_step_flops(config, batch, seq_len).total();
  r.ideal_s = r.model_flops / peaks.flops(dtype);
  for (ComputeUnit u : {ComputeUnit::cuda_core, ComputeUnit::tensor_core_bf16,
                        ComputeUnit::tensor_core_tf32, ComputeUnit::memory})
    r.units.push_back({u, 0, 0, 0, 0, u == ComputeUnit::memory ? 0 : unit_peak_flops(peaks, u)});
  std::map<std::pair<std::string, ComputeUnit>, KernelBound> by_kernel;
  double tensor_core_flops = 0;
  for (const LaunchInfo& launch : step.launches) {
    const double bound = launch_bound_s(launch, peaks);
    r.launches.push_back({launch, bound});
    r.bound_s += bound;
    r.flops += launch.flops;
    r.bytes += launch.bytes;
    if (is_tensor_core(launch.unit)) tensor_core_flops += launch.flops;
    UnitBound& u = r.units[static_cast<size_t>(launch.unit)];
    KernelBound& k = by_kernel[{launch.kernel, launch.unit}];
    k.kernel = launch.kernel;
    k.unit = launch.unit;
    for (auto* sum : {&u.flops, &k.flops}) *sum += launch.flops;
    for (auto* sum : {&u.bytes, &k.bytes}) *sum += launch.bytes;
    for (auto* sum : {&u.bound_s, &k.bound_s}) *sum += bound;
    ++u.launches;
    ++k.launches;
  }
  r.tensor_core_flop_share = r.flops > 0 ? tensor_core_flops / r.flops : 0;
  for (auto& [key, k] : by_kernel) r.kernels.push_back(std::move(k));
  std::stable_sort(
      r.kernels.begin(), r.kernels.end(),
      [](const KernelBound& a, const KernelBound& b) { return a.bound_s > b.bound_s; });
  return r;
}

}  // namespace glass::train
