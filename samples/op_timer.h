// op_timer: times one operation (forward + backward) on one device, the way profile_op reports it.
//
// time_op() runs `warmup` untimed repeats, then `repeats` timed ones without any observer (the
// gateway's fast path), and reports their median; then it runs once more with a TraceRecorder
// subscribed and reports that run's time and the per-kernel summary. A later kernel ladder
// (--variant) plugs in by calling time_op once per configuration and printing one row each.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/kernel_summary.h"
#include "engine/tensor.h"

namespace glass::samples {

struct OpCase {
  Device device = kCPU;
  std::string operation = "matmul";  // matmul | softmax | mlp | attention
  std::vector<int64_t> shape;        // empty: the operation's default (see operation_shape_help)
  DType dtype = DType::f32;
  std::string attention = "auto";  // attention's kernel (autograd/ops.h: AttentionKernel's names)
};

struct TimingPlan {
  int warmup = 3, repeats = 10;
};

struct OpRow {
  OpCase op;
  std::vector<std::pair<std::string, Shape>> tensors;  // the inputs' names and shapes
  std::string clock;  // what measured the times: never a GPU clock unless on a GPU
  double median_ms = 0, min_ms = 0;
  double profiled_ms = 0;  // the run with the recorder subscribed
  AllocatorStats memory;   // peaks over all the runs
  KernelSummary kernels;   // of the profiled run
  bool gradients_finite = false;
};

// The operations, and for each what --shape means ("matmul: M,K,N", ...).
const std::vector<std::string>& operations();
std::string operation_shape_help(const std::string& operation);

// Times `op` as the header says. The profiled run is recorded into `recorder` (its launches are
// the trace). Throws glass::Error naming the operation, shape, dtype or device when they do not
// fit together.
OpRow time_op(const OpCase& op, const TimingPlan& plan, TraceRecorder& recorder);

// The row as profile_op's JSON (device, device_name, engine_version, dtype, shapes, times,
// profiler_overhead, memory, kernels, gradients_finite).
nlohmann::json row_json(const OpRow& row, const std::string& engine_version);

}  // namespace glass::samples
