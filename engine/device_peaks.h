// Device peaks: the FLOP/s and memory bandwidth a roofline is drawn against.
//
// For GPUs the numbers are the vendor's datasheet figures (dense, no sparsity); for the host the
// FLOP/s peak is the hardware's (cores x clock x FLOPs per cycle, kernels/cpu/hardware_peak.h) and
// the bandwidth is measured (kernels/peaks.h). Every DevicePeaks says where its numbers came from,
// and every report that uses one prints that line.
//
// A second, lower roof may come with it: what the engine's own best GEMM attains on this device
// (`attainable_f32_flops`). It is shown beside the peak and never used as one: MFU is against the
// hardware.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/dtype.h"

namespace glass {

struct DevicePeaks {
  std::string name;        // "h200", "cpu", ...
  double f32_flops = 0;    // FLOP/s, f32 math (CUDA cores on a GPU)
  double bf16_flops = 0;   // FLOP/s, bf16 inputs with f32 accumulation (tensor cores); 0 = none
  double bytes_per_s = 0;  // main-memory (HBM / DRAM) bandwidth
  std::string source;      // where the numbers come from
  double attainable_f32_flops = 0;  // the engine's measured f32 GEMM rate; 0 = not measured
  std::string attainable_source{};  // how it was measured
  // FLOP/s, TF32 inputs with f32 accumulation (tensor cores); 0 = none. Last, so that the
  // positional initialisers of the fields above stay as they were.
  double tf32_flops = 0;

  // The peak for math in `dtype`; throws glass::Error when the device has no such peak.
  double flops(DType dtype) const;
  // FLOP/byte where the roofline's sloped (memory) part meets its flat (compute) part.
  double ridge(DType dtype) const { return flops(dtype) / bytes_per_s; }
};

// The GPUs in the table (lower-case names: "a100", "h100", "h200").
const std::vector<DevicePeaks>& known_gpus();
// The table entry called `name`; nullopt if there is none.
std::optional<DevicePeaks> find_known_gpu(const std::string& name);

}  // namespace glass
