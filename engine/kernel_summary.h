// The per-kernel summary: where the time of the recorded launches went, kernel by kernel, and how
// close each kernel came to its roofline floor on this device.
//
// Self time is a launch's duration minus the launches that ran inside it on the same thread (a
// kernel that launches others, e.g. a composite cpu op); total time includes them. The share is
// self time over the recorded window (per step: first launch start to last launch end, summed
// over steps), so the shares add up to the fraction of the step spent inside kernels.
#pragma once

#include <string>
#include <vector>

#include "engine/kernel_resources.h"
#include "engine/roofline.h"
#include "engine/trace.h"

namespace glass {

struct KernelRow {
  std::string kernel;
  int64_t calls = 0;
  double self_us = 0, total_us = 0;
  double flops = 0, bytes = 0;  // summed over calls
  double share = 0;             // self_us / window
  double gbps = 0, gflops = 0;  // achieved over self time
  // Against the peaks, for all calls together, each call's FLOPs against the roof of the unit it
  // ran on (LaunchInfo::unit; a bf16 GEMM's on the bf16 path, cpu's too): floor_s = max(sum of
  // flops / unit roof, bytes / bandwidth), ridge = the calls' combined roof / bandwidth.
  RooflinePoint roof;
  double over_floor = 0;  // self time / roofline floor (1 = on the roof); 0 if no cost
  ComputeUnit unit = ComputeUnit::cuda_core;  // the unit that did most of its FLOPs
};

struct KernelSummary {
  std::vector<KernelRow> rows;  // by self time, largest first
  double window_us = 0;
  DevicePeaks peaks;
  DeviceKind device = DeviceKind::cpu;  // the launches' (names the units in the header)
  // Each launch configuration on emu/cuda with its theoretical occupancy on an H200 (empty for
  // cpu launches); table() prints them after the kernels.
  std::vector<LaunchOccupancy> occupancy;

  // A fixed-width text table with a header naming the peaks and their source.
  std::string table() const;
};

KernelSummary summarize_kernels(const std::vector<TracedLaunch>& launches,
                                const DevicePeaks& peaks);

}  // namespace glass
