// The launch gateway: every kernel on every device runs through glass::launch().
//
// A LaunchInfo says what is about to run (kernel name, grid/block, shared memory, stream), what it
// costs (the FLOPs and bytes the op counted), and why it runs (the autograd op, node id, phase and
// nn module, filled in from the scope the caller is in; while an observer is subscribed, also the
// op's input shapes and dtype, so that a trace names `matmul transformer.h.0.attn.c_attn [...]`
// rather than one more `gemm`). Every such text is a pointer to interned text (engine/interned.h):
// filling them costs a pointer copy each, and nothing is formatted unless someone watches.
// Observers subscribe to see every launch: traces, per-kernel summaries, tests. With no observer
// subscribed the gateway calls the kernel directly and takes no time stamps; with one, a `cuda`
// launch is timed on the GPU with CUDA events. A launch on `meta` (engine/device.h) never calls its
// kernel: the observers see it begin and end at one instant, which is how a step is planned (its
// LaunchInfos, nothing run).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/device.h"

namespace glass {

// recompute: a forward re-run inside backward to rebuild activations that were not saved
// (train_gpt --recompute): hardware FLOPs that the model's FLOPs do not count (HFU, not MFU).
enum class Phase : uint8_t { forward, backward, optimizer, comm, recompute, other };
const char* phase_name(Phase p);

// The unit that does a launch's FLOPs, whose peak is the launch's compute roof (engine/roofline.h).
// On a GPU: the CUDA cores (scalar f32/f64 FMA: every hand-written kernel without mma), the Tensor
// Cores on bf16 (or f16) inputs or on TF32 inputs (cuBLAS GEMMs, the mma kernels), or no unit at
// all: a launch that only moves bytes (copy, memset, fill). On cpu the same ids name the core's
// two paths: `cuda_core` its vector FMA units (f32 and f64), `tensor_core_bf16` AVX512-BF16's
// bf16 dot products (vdpbf16ps: the bf16 GEMMs' and flash attention's products where the core has
// it), whose peak is DevicePeaks::bf16_flops. The ids are the JSON's; compute_unit_label says
// what each is on a given device, for people.
enum class ComputeUnit : uint8_t { cuda_core, tensor_core_bf16, tensor_core_tf32, memory };
const char* compute_unit_name(ComputeUnit u);  // "cuda_core", "tensor_core_bf16", ...
// "CUDA cores", "Tensor Cores (bf16)", ... on a GPU (cuda, emu, meta); "FMA units (f32)",
// "vdpbf16ps (bf16)", ... on cpu.
const char* compute_unit_label(ComputeUnit u, DeviceKind device);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchInfo {
  const char* kernel = "?";  // a string literal: the kernel's name
  // emu and cuda: the __global__ function that runs, when it is not `kernel` + "_kernel" (a generic
  // kernel serving several launches: "map1" for gelu_forward's map1_kernel); matches the launch
  // with ptxas's report (engine/kernel_resources.h). nullptr: the naming convention holds.
  const char* function = nullptr;
  Device device = kCPU;
  Dim3 grid, block;  // on `cpu`: grid.x = work items split over threads, block.x = 1
  size_t shared_bytes = 0;
  int stream = 0;
  // On `cuda`: the cudaStream_t the work is queued on (nullptr: the legacy default stream); while
  // an observer records, the gateway times the launch there with CUDA events.
  void* native_stream = nullptr;
  double flops = 0;  // floating-point operations the kernel must do
  double bytes = 0;  // bytes it must move to and from memory (ideal, each touched once)
  ComputeUnit unit = ComputeUnit::cuda_core;  // which unit does the FLOPs (see ComputeUnit)
  // Filled in by launch() from the current LaunchScope:
  const char* op = "";   // autograd op or optimizer ("layernorm", "adamw", ...)
  int64_t node_id = -1;  // autograd node id, -1 outside autograd
  Phase phase = Phase::other;
  const char* module = "";  // the nn module whose forward made the node ("transformer.h.0.attn")
  // The op's inputs as "f32[4, 8, 16], bf16[48, 16]" and the dtype of its first floating input
  // ("bf16"); set only while an observer is subscribed (autograd/function.cpp), else "".
  const char* shapes = "";
  const char* dtype = "";
  // Nonzero: this launch was captured into CUDA graph `graph` (engine/cuda/graph.h) and is
  // reported at each replay of the graph, not issued from the host (trace args: "graph").
  uint64_t graph = 0;
};

struct LaunchRecord {
  LaunchInfo info;
  uint64_t seq = 0;  // launch number since start, over all devices
  // Microseconds on one clock for all devices (steady_clock since the process started). On cpu
  // and emu, the host clock around the kernel (it has finished when launch() returns); on cuda,
  // when it ran on the GPU, measured with CUDA events (engine/cuda/launch_timer.h).
  double start_us = 0, end_us = 0;
};

// A host synchronisation: the host waited for a device (a device -> host read, a stream or device
// synchronize), with the launch context it happened in.
struct HostSync {
  Device device;
  const char* what = "";  // "copy_to_host", "synchronize", "Stream::synchronize", ...
  const char* op = "";    // the autograd op or optimizer it happened in ("" outside any)
  int64_t node_id = -1;
  Phase phase = Phase::other;
};

class LaunchObserver {
 public:
  virtual ~LaunchObserver() = default;
  virtual void on_launch_begin(const LaunchInfo&) {}
  virtual void on_launch_end(const LaunchRecord&) {}
  virtual void on_host_sync(const HostSync&) {}
};

// Adds / removes an observer. Launches may come from any thread; after unsubscribe() returns, no
// launch on another thread calls `obs` any more (it waits for those in flight), so it may go.
void subscribe(LaunchObserver* obs);
void unsubscribe(LaunchObserver* obs);

// Host synchronisations, counted in one place. A step on a GPU runs ahead of the host only while
// the host does not wait for the device; every wait costs the queue its lead. So each place where
// the engine makes the host wait (Tensor::copy_to_host, glass::synchronize, Stream::synchronize,
// Event::synchronize, a full staging ring in an upload) calls note_host_sync, which counts it and
// tells the observers. `cpu` never waits (its memory is the host's) and is not counted; `emu`
// counts the syncs its engine code performs, which are the ones a GPU would pay for.
void note_host_sync(Device device, const char* what);
// Host synchronisations so far, over all devices and threads (train/ reports the per-step delta).
uint64_t host_sync_count();

// CUDA graph capture (engine/cuda/graph.h). While this thread captures, the gateway runs each
// launch's kernel function, which only records the work into the graph, and appends its LaunchInfo
// to `*launches` instead of telling the observers (nothing has run yet); each replay of the graph
// tells them, through report_replayed_launches. A host synchronisation during a capture throws:
// the host cannot wait for work that is only being recorded.
class CaptureScope {
 public:
  explicit CaptureScope(std::vector<LaunchInfo>* launches);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  std::vector<LaunchInfo>* saved_;
};
bool capturing_graph();
// Throws when this thread is capturing a graph: `what` (on `device`) cannot be captured, `why`.
// The message names the op and autograd node being captured.
void refuse_in_graph_capture(Device device, const char* what, const char* why);
// The same for a host wait (`what`: a read to the host, a synchronisation): the host cannot wait
// for work that is only being recorded.
void refuse_host_wait_in_graph_capture(Device device, const char* what);
// One replay of a captured graph: each captured launch reported to the observers, in order, as
// begun and ended at `at_us` on the launch clock (when the replay was issued). A replay is one
// cudaGraphLaunch: its kernels are not timed one by one, so they show with zero duration.
void report_replayed_launches(const std::vector<LaunchInfo>& launches, double at_us);
// The launch clock: microseconds since the process started (LaunchRecord's start_us, end_us).
double launch_clock_us();

// What the code on this thread is doing right now; launches inherit it.
struct LaunchContext {
  const char* op = "";
  int64_t node_id = -1;
  Phase phase = Phase::other;
  const char* created_at = "";  // where forward created the node (autograd), while the scope lives
  const char* module = "";      // LaunchInfo::module, shapes, dtype: interned text (static life)
  const char* shapes = "";
  const char* dtype = "";
};
LaunchContext& current_launch_context();

// RAII: sets the launch context for the enclosed code and restores the previous one.
class LaunchScope {
 public:
  LaunchScope(const char* op, int64_t node_id, Phase phase, const char* created_at = "")
      : saved_(current_launch_context()) {
    current_launch_context() = {op, node_id, phase, created_at};
  }
  explicit LaunchScope(const LaunchContext& ctx) : saved_(current_launch_context()) {
    current_launch_context() = ctx;
  }
  ~LaunchScope() { current_launch_context() = saved_; }
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;

 private:
  LaunchContext saved_;
};

namespace detail {
extern std::atomic<int> observer_count;
extern thread_local std::vector<LaunchInfo>* captured_launches;  // CaptureScope
void run_captured(const LaunchInfo& info, const std::function<void()>& kernel);
// engine/debug.h: false until the GLASS_* debug variables are read, and while any switch is on.
extern std::atomic<bool> debug_switches_off;
void run_observed(LaunchInfo& info, const std::function<void()>& kernel);
void run_debugged(const LaunchInfo& info, const std::function<void()>& kernel);  // engine/debug.cpp
void report_planned(const LaunchInfo& info);  // a meta launch: to the observers, nothing run
}  // namespace detail

template <class Kernel>
void launch(LaunchInfo info, Kernel&& kernel) {
  const LaunchContext& ctx = current_launch_context();
  info.op = ctx.op;
  info.node_id = ctx.node_id;
  info.phase = ctx.phase;
  info.module = ctx.module;
  info.shapes = ctx.shapes;
  info.dtype = ctx.dtype;
  if (info.device.kind == DeviceKind::meta) {
    detail::report_planned(info);
    return;
  }
  if (detail::captured_launches != nullptr) {
    detail::run_captured(info, std::function<void()>(std::forward<Kernel>(kernel)));
    return;
  }
  if (detail::observer_count.load(std::memory_order_relaxed) == 0 &&
      detail::debug_switches_off.load(std::memory_order_relaxed)) {
    kernel();  // fast path: nobody is watching, so no clock and no allocation
    return;
  }
  detail::run_observed(info, std::function<void()>(std::forward<Kernel>(kernel)));
}

}  // namespace glass
