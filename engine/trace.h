// TraceRecorder: a launch observer that keeps every launch it sees and writes them as a
// Chrome-trace / Perfetto JSON file (open it at ui.perfetto.dev or chrome://tracing).
//
// The file holds, per launch, a complete event (ph "X", times in µs) on pid = the device and
// tid = the host thread that launched it (or the stream, for launches on a side stream), named
// `<op> <module> [<shapes>]` ("matmul transformer.h.0.attn.c_attn [f32[2, 8, 16], f32[48, 16]]";
// the kernel's name where the launch has no op), with the kernel, module, shapes, dtype, grid,
// block, shared memory, FLOPs, bytes, op, autograd node, phase and achieved GB/s and FLOP/s as
// args. Around the launches of each step it adds a span per step and, inside it, one span per run
// of launches of one phase (forward / backward / optimizer / comm), so Perfetto nests step > phase
// > kernel. Flow events (ph "s" -> "f", one id per pair) arrow from each autograd node's first
// forward launch to every launch of that node's backward. Counter events plot the allocator's
// allocated and reserved bytes after every launch, and any counters added with add_counter (the
// step explorer's memory ledger); metadata events name the processes and threads. Host work that
// launches nothing (reading a batch, writing a checkpoint, waiting for the device) is added with
// add_host_span: a complete event of category "host" on a track of its own ("host work"), with its
// phase and step as args, on the same clock as the launches.
//
// Launches may arrive from several host threads at once: the recorder takes a lock per launch.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/launch.h"

namespace glass {

struct TracedLaunch {
  LaunchRecord record;
  int tid = 0;        // 1, 2, ... host threads in order of first launch; 1000 + s for stream s
  int64_t step = -1;  // the step it belongs to (begin_step/end_step), -1 outside steps
  int64_t allocated_bytes = 0, reserved_bytes = 0;  // the device's allocator right after it
};

// Host work between or around launches, timed on the launch clock (launch_clock_us).
struct HostSpan {
  std::string name;   // "batch 2: read + upload", "checkpoint"
  std::string phase;  // "data", "checkpoint", "host wait"
  double start_us = 0, end_us = 0;
  int64_t step = -1;  // the step it belongs to
  Device device;      // whose work it feeds or waits for: the track it goes on
};

class TraceRecorder : public LaunchObserver {
 public:
  TraceRecorder() = default;
  ~TraceRecorder() override { stop(); }
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Subscribes to / unsubscribes from the launch gateway; only launches in between are kept.
  void start();
  void stop();
  bool recording() const { return recording_; }

  // Launches from begin_step(n) to end_step() belong to step n.
  void begin_step(int64_t step);
  void end_step();

  void on_launch_end(const LaunchRecord& r) override;

  // Everything recorded so far, in the order the launches ended.
  std::vector<TracedLaunch> launches() const;

  // A counter sample shown with the trace: `name` at `ts_us` (the launch clock) on `device`'s
  // track, one value per (series, value) pair.
  void add_counter(const std::string& name, double ts_us, Device device,
                   const std::vector<std::pair<std::string, double>>& values);

  // Host work, recorded whether or not launches are being recorded (see HostSpan).
  void add_host_span(HostSpan span);
  std::vector<HostSpan> host_spans() const;

  nlohmann::json to_json() const;
  // Writes to_json() to `path` atomically; throws glass::Error naming the path on failure.
  void write(const std::string& path) const;

 private:
  int tid_of_this_thread();  // with mu_ held

  mutable std::mutex mu_;
  std::atomic<bool> recording_{false};
  std::atomic<int64_t> step_{-1};
  std::vector<TracedLaunch> launches_;
  std::vector<nlohmann::json> counters_;  // add_counter's events
  std::vector<HostSpan> host_spans_;
  std::unordered_map<std::thread::id, int> thread_tids_;
  int step_tid_ = 1;  // the thread that marks steps: the step spans go on its track
};

}  // namespace glass
