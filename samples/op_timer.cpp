#include "samples/op_timer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "autograd/backward.h"
#include "autograd/grad_norms.h"
#include "autograd/ops.h"
#include "engine/error.h"
#include "kernels/peaks.h"

namespace glass::samples {

namespace {

// One operation ready to run: its leaves (inputs that get gradients), the forward, and the
// gradient fed into backward (random, so no reduction kernel is added to what is measured).
struct OpInstance {
  std::vector<std::pair<std::string, Tensor>> leaves;
  std::function<Tensor(const std::vector<Tensor>&)> forward;
  Tensor upstream;
};

struct OperationDef {
  std::string name, shape_help;
  std::vector<int64_t> default_shape;
  // The leaves' shapes for a --shape; forward on the leaves.
  std::function<std::vector<std::pair<std::string, Shape>>(const std::vector<int64_t>&)> leaves;
  // forward on the leaves, given --shape's sizes and the attention kernel (attention only)
  std::function<Tensor(const std::vector<Tensor>&, const std::vector<int64_t>&, AttentionKernel)>
      forward;
};

const std::vector<OperationDef>& definitions() {
  static const std::vector<OperationDef> defs = {
      {"matmul",
       "M,K,N: A [M,K] @ B [K,N]",
       {256, 384, 320},
       [](const std::vector<int64_t>& s) {
         return std::vector<std::pair<std::string, Shape>>{{"a", {s[0], s[1]}},
                                                           {"b", {s[1], s[2]}}};
       },
       [](const std::vector<Tensor>& x, const std::vector<int64_t>&, AttentionKernel) {
         return matmul(x[0], x[1]);
       }},
      {"softmax",
       "R,C: softmax over the last dim of x [R,C]",
       {256, 1000},
       [](const std::vector<int64_t>& s) {
         return std::vector<std::pair<std::string, Shape>>{{"x", {s[0], s[1]}}};
       },
       [](const std::vector<Tensor>& x, const std::vector<int64_t>&, AttentionKernel) {
         return softmax(x[0]);
       }},
      {"mlp",
       "T,C: GPT MLP on x [T,C]: Linear(C,4C) -> GELU -> Linear(4C,C)",
       {128, 96},
       [](const std::vector<int64_t>& s) {
         const int64_t T = s[0], C = s[1];
         return std::vector<std::pair<std::string, Shape>>{{"x", {T, C}},
                                                           {"c_fc.weight", {4 * C, C}},
                                                           {"c_fc.bias", {4 * C}},
                                                           {"c_proj.weight", {C, 4 * C}},
                                                           {"c_proj.bias", {C}}};
       },
       [](const std::vector<Tensor>& x, const std::vector<int64_t>&, AttentionKernel) {
         return linear(gelu(linear(x[0], x[1], x[2])), x[3], x[4]);
       }},
      {"attention",
       "B, H, T, D: causal self-attention on the fused qkv [B,T,3HD] (the kernel: --attention)",
       {4, 12, 256, 64},
       [](const std::vector<int64_t>& s) {
         return std::vector<std::pair<std::string, Shape>>{{"qkv", {s[0], s[2], 3 * s[1] * s[3]}}};
       },
       [](const std::vector<Tensor>& x, const std::vector<int64_t>& s, AttentionKernel kernel) {
         return causal_attention(x[0], s[1], kernel);
       }},
  };
  return defs;
}

const OperationDef& definition(const std::string& name) {
  for (const OperationDef& d : definitions())
    if (d.name == name) return d;
  fail("unknown operation '{}' (expected {})", name, fmt::join(operations(), ", "));
}

OpInstance instantiate(const OpCase& op) {
  const OperationDef& def = definition(op.operation);
  const std::vector<int64_t> shape = op.shape.empty() ? def.default_shape : op.shape;
  GLASS_CHECK(shape.size() == def.default_shape.size() &&
                  std::all_of(shape.begin(), shape.end(), [](int64_t v) { return v > 0; }),
              "--shape {}: {} takes {} positive sizes, {}", fmt::join(shape, ","), op.operation,
              def.default_shape.size(), def.shape_help);
  const AttentionKernel attention = parse_attention_kernel(op.attention);
  if (op.operation == "attention")  // one line for a kernel that cannot run here
    check_attention_kernel(resolve_attention_kernel(attention, op.device, op.dtype, shape[3]),
                           op.device, op.dtype, shape[3]);
  Generator gen(1234);
  OpInstance inst;
  for (const auto& [name, s] : def.leaves(shape)) {
    Tensor t = randn(s, gen, 0, 1, op.dtype, op.device);
    t.set_requires_grad(true);
    inst.leaves.emplace_back(name, t);
  }
  inst.forward = [forward = def.forward, shape, attention](const std::vector<Tensor>& x) {
    return forward(x, shape, attention);
  };
  std::vector<Tensor> probe;
  for (const auto& l : inst.leaves) probe.push_back(l.second);
  Shape out_shape;
  {
    NoGradGuard no_grad;
    out_shape = inst.forward(probe).shape();
  }
  inst.upstream = randn(out_shape, gen, 0, 1, op.dtype, op.device);
  return inst;
}

// The leaves with their gradients dropped: the next backward writes fresh ones.
std::vector<Tensor> fresh_leaves(OpInstance& inst) {
  std::vector<Tensor> xs;
  for (auto& [name, t] : inst.leaves) {
    t.set_grad(Tensor());
    xs.push_back(t);
  }
  return xs;
}

// Forward and backward once, from fresh gradients; returns the host time in ms. The device is
// synchronised before the clock is read at both ends: on `cuda` the kernels run after their
// launches return, and the time must be the GPU's work, not the host's launching. With `tape`,
// the run's tape is recorded into it between forward and backward (on the host: no launch).
double run_once(OpInstance& inst, std::vector<TapeNode>* tape = nullptr) {
  const std::vector<Tensor> xs = fresh_leaves(inst);
  const Device device = inst.upstream.device();
  synchronize(device);
  const auto t0 = std::chrono::steady_clock::now();
  const Tensor out = inst.forward(xs);
  if (tape) *tape = record_tape(out);
  backward(out, inst.upstream);
  synchronize(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The operation's tape with the gradient norm of every node, from a forward and backward of its
// own (the loss sum(out * upstream): d loss / d out = upstream).
std::vector<TapeNode> grad_norm_tape(OpInstance& inst) {
  const Tensor out = inst.forward(fresh_leaves(inst));
  return tape_with_grad_norms(out, [&] { backward(out, inst.upstream); });
}

bool gradients_finite(const OpInstance& inst) {
  for (const auto& [name, t] : inst.leaves) {
    if (!t.grad().defined()) return false;
    for (float g : to_vector<float>(cast(t.grad(), DType::f32)))
      if (!std::isfinite(g)) return false;
  }
  return true;
}

// The dtype of the peak the op's products can reach (JSON `peak_dtype`; each kernel row is judged
// against the roof of the unit its launches ran on, KernelRow). emu's bf16 kernels load and store
// bf16 but do their math in f32 on the host, so the host's f32 peak is the one they can reach (as
// train_gpt's MFU takes it); a GPU's bf16 math runs on its tensor cores, whose datasheet peak it
// is (a GPU without a datasheet row has no bf16 peak: the summary says so).
DType peak_dtype(const OpCase& op) {
  if (op.device.kind == DeviceKind::emu) return DType::f32;
  // cpu: its bf16 GEMMs multiply bf16 (vdpbf16ps) where the core has AVX512-BF16, else in f32
  if (op.device.kind == DeviceKind::cpu && kernels::peaks_for(op.device).bf16_flops <= 0)
    return DType::f32;
  return op.dtype;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

const std::vector<std::string>& operations() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const OperationDef& d : definitions()) n.push_back(d.name);
    return n;
  }();
  return names;
}

std::string operation_shape_help(const std::string& operation) {
  return definition(operation).shape_help;
}

OpRow time_op(const OpCase& op, const TimingPlan& plan, TraceRecorder& recorder) {
  GLASS_CHECK(plan.warmup >= 0 && plan.repeats >= 1, "warmup {} must be >= 0 and repeats {} >= 1",
              plan.warmup, plan.repeats);
  OpInstance inst = instantiate(op);
  OpRow row;
  row.op = op;
  for (const auto& [name, t] : inst.leaves) row.tensors.emplace_back(name, t.shape());
  switch (op.device.kind) {
    case DeviceKind::cpu:
      row.clock = "host wall clock";
      break;
    case DeviceKind::emu:
      row.clock = "host wall clock: emulated CUDA kernels on the CPU, not GPU time";
      break;
    case DeviceKind::cuda:
      row.clock =
          "host wall clock around the GPU work, device synchronised at both ends; "
          "per-kernel times from CUDA events";
      break;
    case DeviceKind::meta:
      fail(
          "profile_op: meta runs nothing, so there is nothing to time (plan a step with "
          "roofline step)");
  }
  // The gradient norms' pass first: its reductions and read stay out of every timed run.
  const std::vector<TapeNode> norms = plan.tape ? grad_norm_tape(inst) : std::vector<TapeNode>{};
  Allocator& alloc = Allocator::for_device(op.device);
  alloc.reset_peaks();
  for (int i = 0; i < plan.warmup; ++i) run_once(inst);
  std::vector<double> ms;
  for (int i = 0; i < plan.repeats; ++i) ms.push_back(run_once(inst));
  row.median_ms = median(ms);
  row.min_ms = *std::min_element(ms.begin(), ms.end());
  recorder.start();
  recorder.begin_step(0);
  row.profiled_ms = run_once(inst, plan.tape ? &row.tape : nullptr);
  recorder.end_step();
  recorder.stop();
  GLASS_CHECK(!plan.tape || copy_grad_norms(norms, row.tape),
              "{}: the gradient-norm pass recorded {} nodes, the profiled run {}", op.operation,
              norms.size(), row.tape.size());
  row.gradients_finite = gradients_finite(inst);
  row.memory = alloc.stats();
  row.kernels = summarize_kernels(recorder.launches(), kernels::peaks_for(op.device));
  return row;
}

nlohmann::json row_json(const OpRow& row, const std::string& engine_version) {
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [name, s] : row.tensors) shapes[name] = s;
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelRow& k : row.kernels.rows)
    kernels.push_back({{"kernel", k.kernel},
                       {"calls", k.calls},
                       {"self_ms", k.self_us / 1e3},
                       {"total_ms", k.total_us / 1e3},
                       {"flops", k.flops},
                       {"bytes", k.bytes},
                       {"achieved_GBps", k.gbps},
                       {"achieved_GFLOPps", k.gflops},
                       {"intensity", k.roof.intensity},
                       {"bound", k.roof.bound()},
                       {"times_roofline_floor", k.over_floor}});
  // Each launch configuration's theoretical occupancy on an H200 (emu and cuda launches; null
  // where ptxas reported no function for the launch, with "library" for a cuBLAS or cuDNN call).
  nlohmann::json occupancy = nlohmann::json::array();
  for (const LaunchOccupancy& o : row.kernels.occupancy) {
    nlohmann::json entry = {{"kernel", o.kernel},
                            {"threads_per_block", o.threads},
                            {"dynamic_shared_bytes", o.dynamic_shared_bytes},
                            {"calls", o.calls}};
    if (o.instantiations > 0) {
      entry.update({{"registers", o.registers},
                    {"static_shared_bytes", o.static_shared_bytes},
                    {"spills", o.spills},
                    {"mma_instructions", o.mma_instructions},
                    {"blocks_per_sm", o.occupancy.blocks_per_sm},
                    {"occupancy", o.occupancy.fraction},
                    {"limited_by", o.occupancy.limiter}});
    } else {
      entry["occupancy"] = nullptr;
      if (!o.library.empty()) entry["library"] = o.library;
    }
    occupancy.push_back(entry);
  }
  const DevicePeaks& p = row.kernels.peaks;
  return {{"device", row.op.device.str()},
          {"device_name", device_name(row.op.device)},
          {"engine_version", engine_version},
          {"operation", row.op.operation},
          // the attention kernel asked for (the kernels that ran are the kernel rows)
          {"attention", row.op.operation == "attention" ? row.op.attention : ""},
          {"dtype", dtype_name(row.op.dtype)},
          {"peak_dtype", dtype_name(peak_dtype(row.op))},  // the peak of the op's products
          {"shapes", shapes},
          {"clock", row.clock},
          {"median_ms", row.median_ms},
          {"min_ms", row.min_ms},
          {"profiled_ms", row.profiled_ms},
          // (with - without) / without; noise can make it slightly negative
          {"profiler_overhead", (row.profiled_ms - row.median_ms) / row.median_ms},
          {"peak_allocated_bytes", row.memory.peak_allocated_bytes},
          {"peak_reserved_bytes", row.memory.peak_reserved_bytes},
          {"kernels", kernels},
          {"occupancy", occupancy},
          {"peaks",
           {{"name", p.name},
            {"f32_flops", p.f32_flops},
            {"bf16_flops", p.bf16_flops},
            {"bytes_per_s", p.bytes_per_s},
            {"source", p.source}}},
          {"gradients_finite", row.gradients_finite}};
}

}  // namespace glass::samples
