// op_timer: times one operation (forward + backward) on one device, the way profile_op reports it.
//
// time_op() runs `warmup` untimed repeats, then `repeats` timed ones without any observer (the
// gateway's fast path), and reports their median; then it runs once more with a TraceRecorder
// subscribed and reports that run's time and the per-kernel summary (and, for the step explorer,
// its tape with every node's gradient norm, from one more pass run before the others: the profiled
// run gets no extra launch or host read from it). A later kernel ladder
// (--variant) plugs in by calling time_op once per configuration and printing one row each.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/tape_record.h"
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
  // Record the profiled run's tape (OpRow::tape), each node with its gradient norm, measured on a
  // pass of its own before the timed runs (autograd/grad_norms.h): profile_op --report.
  bool tape = false;
};

struct OpRow {
  OpCase op;
  std::vector<std::pair<std::string, Shape>> tensors;  // the inputs' names and shapes
  std::string clock;  // what measured the times: never a GPU clock unless on a GPU
  double median_ms = 0, min_ms = 0;
  double profiled_ms = 0;  // the run with the recorder subscribed
  AllocatorStats memory;   // peaks over all the runs
  KernelSummary kernels;   // of the profiled run
  // TimingPlan::tape: the profiled run's tape, with |d loss / d out| per node, where the loss is
  // sum(out * upstream) for the random `upstream` backward starts from (so d loss / d out =
  // upstream); else empty.
  std::vector<TapeNode> tape;
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
