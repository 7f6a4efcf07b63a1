#include "engine/launch.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "engine/device_runtime.h"
#include "engine/error.h"

namespace glass {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
    case Phase::comm:
      return "comm";
    case Phase::recompute:
      return "recompute";
    case Phase::other:
      return "other";
  }
  return "?";
}

const char* compute_unit_name(ComputeUnit u) {
  switch (u) {
    case ComputeUnit::cuda_core:
      return "cuda_core";
    case ComputeUnit::tensor_core_bf16:
      return "tensor_core_bf16";
    case ComputeUnit::tensor_core_tf32:
      return "tensor_core_tf32";
    case ComputeUnit::memory:
      return "memory";
  }
  return "?";
}

const char* compute_unit_label(ComputeUnit u, DeviceKind device) {
  const bool cpu = device == DeviceKind::cpu;
  switch (u) {
    case ComputeUnit::cuda_core:
      return cpu ? "FMA units (f32)" : "CUDA cores";
    case ComputeUnit::tensor_core_bf16:
      return cpu ? "vdpbf16ps (bf16)" : "Tensor Cores (bf16)";
    case ComputeUnit::tensor_core_tf32:
      return cpu ? "TF32 (none on cpu)" : "Tensor Cores (TF32)";
    case ComputeUnit::memory:
      return "memory";
  }
  return "?";
}

namespace {
std::mutex observers_mu;
std::vector<LaunchObserver*> observers;
// Observed launches running now, on all threads and on this one: unsubscribe() waits until the
// other threads' launches, which may still call the observer, are done.
std::condition_variable launches_done;
int launches_in_flight = 0;
thread_local int launches_in_flight_here = 0;
std::atomic<uint64_t> launch_seq{0};
std::atomic<uint64_t> host_syncs{0};
const auto clock_origin = std::chrono::steady_clock::now();

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - clock_origin)
      .count();
}

// Runs the kernel and stamps rec with when it ran: on the device's clock for a watched launch
// where the device has one (cuda), else on the host's.
void run_timed(const LaunchInfo& info, const std::function<void()>& kernel, bool watched,
               LaunchRecord& rec) {
  if (watched && runtime_for(info.device)
                     .time_on_device(
                         info.native_stream, [&] { detail::run_debugged(info, kernel); }, now_us,
                         rec.start_us, rec.end_us))
    return;
  rec.start_us = now_us();
  detail::run_debugged(info, kernel);
  rec.end_us = now_us();
}

// A snapshot of the observers, taken while counting this thread in as a caller of them; counted
// out however the call ends (a kernel may throw), so that unsubscribe() can wait for it.
struct InFlight {
  std::vector<LaunchObserver*> snapshot;
  InFlight() {
    {
      std::lock_guard lock(observers_mu);
      snapshot = observers;
      ++launches_in_flight;
    }
    ++launches_in_flight_here;
  }
  ~InFlight() {
    --launches_in_flight_here;
    {
      std::lock_guard lock(observers_mu);
      --launches_in_flight;
    }
    launches_done.notify_all();
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
};

}  // namespace

namespace detail {
std::atomic<int> observer_count{0};
thread_local std::vector<LaunchInfo>* captured_launches = nullptr;

void run_captured(const LaunchInfo& info, const std::function<void()>& kernel) {
  captured_launches->push_back(info);
  kernel();  // on a capturing stream this records the launch; nothing runs
}

void run_observed(LaunchInfo& info, const std::function<void()>& kernel) {
  const InFlight in_flight;
  const std::vector<LaunchObserver*>& obs = in_flight.snapshot;
  for (auto* o : obs) o->on_launch_begin(info);
  LaunchRecord rec;
  rec.info = info;
  rec.seq = launch_seq.fetch_add(1, std::memory_order_relaxed);
  run_timed(info, kernel, !obs.empty(), rec);
  for (auto* o : obs) o->on_launch_end(rec);
}

void report_planned(const LaunchInfo& info) {
  if (observer_count.load(std::memory_order_relaxed) == 0) return;
  const InFlight in_flight;
  for (auto* o : in_flight.snapshot) o->on_launch_begin(info);
  LaunchRecord rec;
  rec.info = info;
  rec.seq = launch_seq.fetch_add(1, std::memory_order_relaxed);
  rec.start_us = rec.end_us = now_us();
  for (auto* o : in_flight.snapshot) o->on_launch_end(rec);
}
}  // namespace detail

void subscribe(LaunchObserver* obs) {
  std::lock_guard lock(observers_mu);
  observers.push_back(obs);
  detail::observer_count = static_cast<int>(observers.size());
}

void unsubscribe(LaunchObserver* obs) {
  std::unique_lock lock(observers_mu);
  observers.erase(std::remove(observers.begin(), observers.end(), obs), observers.end());
  detail::observer_count = static_cast<int>(observers.size());
  // Launches on other threads that started before the erase may still call `obs`: once they are
  // done, the caller may destroy it. (This thread's own launches, if it unsubscribes from inside
  // one, cannot be waited for.)
  launches_done.wait(lock, [] { return launches_in_flight == launches_in_flight_here; });
}

void note_host_sync(Device device, const char* what) {
  if (device.kind == DeviceKind::cpu) return;
  refuse_host_wait_in_graph_capture(device, what);
  host_syncs.fetch_add(1, std::memory_order_relaxed);
  if (detail::observer_count.load(std::memory_order_relaxed) == 0) return;
  const LaunchContext& ctx = current_launch_context();
  const HostSync sync{device, what, ctx.op, ctx.node_id, ctx.phase};
  const InFlight in_flight;
  for (auto* o : in_flight.snapshot) o->on_host_sync(sync);
}

uint64_t host_sync_count() { return host_syncs.load(std::memory_order_relaxed); }

CaptureScope::CaptureScope(std::vector<LaunchInfo>* launches) : saved_(detail::captured_launches) {
  detail::captured_launches = launches;
}

CaptureScope::~CaptureScope() { detail::captured_launches = saved_; }

bool capturing_graph() { return detail::captured_launches != nullptr; }

void refuse_in_graph_capture(Device device, const char* what, const char* why) {
  if (detail::captured_launches == nullptr) return;
  const LaunchContext& ctx = current_launch_context();
  fail("{} on {} inside a CUDA graph capture (op '{}', node {}, phase {}): {}", what, device.str(),
       *ctx.op ? ctx.op : "none", ctx.node_id, phase_name(ctx.phase), why);
}

void refuse_host_wait_in_graph_capture(Device device, const char* what) {
  refuse_in_graph_capture(device, what,
                          "the host cannot wait for work that is only being recorded; read "
                          "results after the graph's replay");
}

void report_replayed_launches(const std::vector<LaunchInfo>& launches, double at_us) {
  if (detail::observer_count.load(std::memory_order_relaxed) == 0) return;
  const InFlight in_flight;
  for (const LaunchInfo& info : launches) {
    for (auto* o : in_flight.snapshot) o->on_launch_begin(info);
    LaunchRecord rec;
    rec.info = info;
    rec.seq = launch_seq.fetch_add(1, std::memory_order_relaxed);
    rec.start_us = rec.end_us = at_us;
    for (auto* o : in_flight.snapshot) o->on_launch_end(rec);
  }
}

double launch_clock_us() { return now_us(); }

LaunchContext& current_launch_context() {
  thread_local LaunchContext ctx;
  return ctx;
}

}  // namespace glass
