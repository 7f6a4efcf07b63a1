// A recorded training step (train/step_plan.h) against a GPU's roofs: how long each launch must
// take at the least, on the unit that does its FLOPs, and how far the step's sum of those bounds
// is from the model's FLOPs at 100% MFU.
//
//   bound(launch) = max(flops / peak(unit), bytes / bandwidth)     (engine/roofline.h)
//   bound_s       = sum over the step's launches of bound(launch)  (launches one after another)
//   ideal_s       = model FLOPs / peak(dtype), model FLOPs = (6 N' + 12 L T C) B T
//                   (train/gpt_cost.h; the dtype's peak: bf16 Tensor Cores for bf16, as MFU)
//   tensor_core_flop_share = FLOPs of Tensor Core launches / FLOPs of all launches
// bound_s >= ideal_s unless the launches do fewer FLOPs than the model counts (causal attention
// does half of 12 L T C); bound_s / ideal_s says how much of the step is not Tensor Core math:
// FLOPs on the CUDA cores at 1/15 of the rate, and bytes moved by memory-bound kernels.
#pragma once

#include <string>
#include <vector>

#include "engine/device_peaks.h"
#include "engine/launch.h"
#include "train/step_plan.h"

namespace glass::train {

struct LaunchBound {
  LaunchInfo launch;
  double bound_s = 0;
};

// The launches of one kernel on one unit, summed.
struct KernelBound {
  std::string kernel;
  ComputeUnit unit = ComputeUnit::cuda_core;
  int64_t launches = 0;
  double flops = 0, bytes = 0, bound_s = 0;
};

struct UnitBound {
  ComputeUnit unit = ComputeUnit::cuda_core;
  int64_t launches = 0;
  double flops = 0, bytes = 0, bound_s = 0;
  double peak_flops = 0;  // the unit's roof on this GPU (0: none, or memory)
};

struct StepRoofline {
  DevicePeaks peaks;
  DType dtype = DType::bf16;
  double model_flops = 0;       // (6 N' + 12 L T C) B T
  double ideal_s = 0;           // model_flops / peaks.flops(dtype)
  double bound_s = 0;           // sum of the per-launch bounds
  double flops = 0, bytes = 0;  // over the launches
  double tensor_core_flop_share = 0;
  std::vector<LaunchBound> launches;  // in issue order
  std::vector<KernelBound> kernels;   // largest bound first
  std::vector<UnitBound> units;       // cuda_core, tensor_core_bf16, tensor_core_tf32, memory
};

// `step` of a GPT `config` at batch x seq_len against `peaks`.
StepRoofline step_roofline(const RecordedStep& step, const GPTConfig& config, int64_t batch,
                           int64_t seq_len, DType dtype, const DevicePeaks& peaks);

}  // namespace glass::train
