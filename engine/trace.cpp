#include "engine/trace.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "engine/allocator.h"
#include "engine/atomic_file.h"

namespace glass {

namespace {

constexpr int kStreamTidBase = 1000;
constexpr int kHostWorkTid = 900;  // the track of the host spans

// Chrome-trace process ids are integers: one per device, named by metadata.
int pid_of(Device d) { return 1 + static_cast<int>(d.kind) * 100 + d.index; }

nlohmann::json dim_json(const Dim3& d) { return {d.x, d.y, d.z}; }

// `<op> <module> [<shapes>]`, each part only where the launch has it; the kernel without an op.
std::string slice_name(const LaunchInfo& info) {
  std::string name = *info.op ? info.op : info.kernel;
  if (*info.module) name += std::string(" ") + info.module;
  if (*info.shapes) name += std::string(" [") + info.shapes + "]";
  return name;
}

nlohmann::json launch_event(const TracedLaunch& l) {
  const LaunchInfo& info = l.record.info;
  const double dur = l.record.end_us - l.record.start_us;
  // bytes/µs = MB/s, so /1e3 gives GB/s; FLOP/µs / 1e3 = GFLOP/s.
  const double gbps = dur > 0 ? info.bytes / dur / 1e3 : 0;
  const double gflops = dur > 0 ? info.flops / dur / 1e3 : 0;
  return {{"name", slice_name(info)},
          {"cat", phase_name(info.phase)},
          {"ph", "X"},
          {"ts", l.record.start_us},
          {"dur", dur},
          {"pid", pid_of(info.device)},
          {"tid", l.tid},
          {"args",
           {{"kernel", info.kernel},
            {"module", info.module},
            {"shapes", info.shapes},
            {"dtype", info.dtype},
            {"grid", dim_json(info.grid)},
            {"block", dim_json(info.block)},
            {"shared_bytes", info.shared_bytes},
            {"stream", info.stream},
            {"flops", info.flops},
            {"bytes", info.bytes},
            {"op", info.op},
            {"node_id", info.node_id},
            {"phase", phase_name(info.phase)},
            {"seq", l.record.seq},
            {"step", l.step},
            {"achieved_GBps", gbps},
            {"achieved_GFLOPps", gflops},
            // a kernel replayed by CUDA graph N (engine/cuda/graph.h); 0: launched from the host
            {"graph", info.graph}}}};
}

nlohmann::json span_event(const std::string& name, const char* cat, double start, double end,
                          int pid, int tid) {
  return {{"name", name},       {"cat", cat}, {"ph", "X"}, {"ts", start},
          {"dur", end - start}, {"pid", pid}, {"tid", tid}};
}

nlohmann::json memory_event(const TracedLaunch& l) {
  constexpr double MiB = 1 << 20;
  return {{"name", "memory"},
          {"ph", "C"},
          {"ts", l.record.end_us},
          {"pid", pid_of(l.record.info.device)},
          {"tid", 0},
          {"args",
           {{"allocated_MiB", static_cast<double>(l.allocated_bytes) / MiB},
            {"reserved_MiB", static_cast<double>(l.reserved_bytes) / MiB}}}};
}

nlohmann::json name_event(const char* what, const std::string& name, int pid, int tid) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

// A flow event binding to the slice of `l`: the arrow's tail ("s") or head ("f").
nlohmann::json flow_event(const TracedLaunch& l, const char* ph, uint64_t id) {
  const double mid = (l.record.start_us + l.record.end_us) / 2;
  nlohmann::json e = {{"name", "backward of node " + std::to_string(l.record.info.node_id)},
                      {"cat", "autograd"},
                      {"ph", ph},
                      {"id", id},
                      {"ts", mid},
                      {"pid", pid_of(l.record.info.device)},
                      {"tid", l.tid}};
  if (std::string_view(ph) == "f") e["bp"] = "e";  // bind to the enclosing slice
  return e;
}

// Per autograd node: an arrow from its first forward launch to each launch of its backward.
void add_flows(const std::vector<TracedLaunch>& launches, nlohmann::json& events) {
  std::map<int64_t, const TracedLaunch*> forward;  // node -> its first forward launch
  for (const TracedLaunch& l : launches) {
    const LaunchInfo& info = l.record.info;
    if (info.phase != Phase::forward || info.node_id < 0) continue;
    auto [it, added] = forward.try_emplace(info.node_id, &l);
    if (!added && l.record.seq < it->second->record.seq) it->second = &l;
  }
  uint64_t id = 1;
  for (const TracedLaunch& l : launches) {
    const LaunchInfo& info = l.record.info;
    if (info.phase != Phase::backward || info.node_id < 0) continue;
    const auto it = forward.find(info.node_id);
    if (it == forward.end()) continue;
    events.push_back(flow_event(*it->second, "s", id));
    events.push_back(flow_event(l, "f", id));
    ++id;
  }
}

// One span per maximal run of consecutive launches of one phase on one thread, within a step.
// `ls` are one step's launches on one thread, in launch order.
void add_phase_spans(const std::vector<const TracedLaunch*>& ls, nlohmann::json& events) {
  size_t i = 0;
  while (i < ls.size()) {
    const Phase phase = ls[i]->record.info.phase;
    double start = ls[i]->record.start_us, end = ls[i]->record.end_us;
    size_t j = i + 1;
    for (; j < ls.size() && ls[j]->record.info.phase == phase; ++j) {
      start = std::min(start, ls[j]->record.start_us);
      end = std::max(end, ls[j]->record.end_us);
    }
    events.push_back(span_event(phase_name(phase), "phase", start, end,
                                pid_of(ls[i]->record.info.device), ls[i]->tid));
    i = j;
  }
}

}  // namespace

void TraceRecorder::start() {
  if (recording_.exchange(true)) return;
  subscribe(this);
}

// Not under mu_: unsubscribe() waits for launches in flight on other threads, and those take mu_
// in on_launch_end.
void TraceRecorder::stop() {
  if (!recording_.exchange(false)) return;
  unsubscribe(this);
}

void TraceRecorder::begin_step(int64_t step) {
  std::lock_guard lock(mu_);
  step_tid_ = tid_of_this_thread();
  step_ = step;
}

void TraceRecorder::end_step() { step_ = -1; }

int TraceRecorder::tid_of_this_thread() {
  const auto [it, added] = thread_tids_.try_emplace(std::this_thread::get_id(),
                                                    static_cast<int>(thread_tids_.size()) + 1);
  return it->second;
}

void TraceRecorder::on_launch_end(const LaunchRecord& r) {
  const AllocatorStats mem = Allocator::for_device(r.info.device).stats();
  std::lock_guard lock(mu_);
  TracedLaunch l;
  l.record = r;
  l.tid = r.info.stream != 0 ? kStreamTidBase + r.info.stream : tid_of_this_thread();
  l.step = step_;
  l.allocated_bytes = mem.allocated_bytes;
  l.reserved_bytes = mem.reserved_bytes;
  launches_.push_back(l);
}

void TraceRecorder::add_counter(const std::string& name, double ts_us, Device device,
                                const std::vector<std::pair<std::string, double>>& values) {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& [series, value] : values) args[series] = value;
  std::lock_guard lock(mu_);
  counters_.push_back({{"name", name},
                       {"ph", "C"},
                       {"ts", ts_us},
                       {"pid", pid_of(device)},
                       {"tid", 0},
                       {"args", args}});
}

void TraceRecorder::add_host_span(HostSpan span) {
  std::lock_guard lock(mu_);
  host_spans_.push_back(std::move(span));
}

std::vector<HostSpan> TraceRecorder::host_spans() const {
  std::lock_guard lock(mu_);
  return host_spans_;
}

std::vector<TracedLaunch> TraceRecorder::launches() const {
  std::lock_guard lock(mu_);
  return launches_;
}

nlohmann::json TraceRecorder::to_json() const {
  std::lock_guard lock(mu_);
  nlohmann::json events = nlohmann::json::array();
  std::set<std::pair<int, int>> tracks;  // (pid, tid)
  std::map<int, std::string> processes;
  // step -> tid -> that thread's launches of the step, in launch order
  std::map<int64_t, std::map<int, std::vector<const TracedLaunch*>>> steps;
  for (const TracedLaunch& l : launches_) {
    events.push_back(launch_event(l));
    events.push_back(memory_event(l));
    const int pid = pid_of(l.record.info.device);
    tracks.insert({pid, l.tid});
    processes[pid] = l.record.info.device.str();
    if (l.step >= 0) steps[l.step][l.tid].push_back(&l);
  }
  for (auto& [step, per_thread] : steps) {
    double start = 1e300, end = -1e300;
    int pid = 0;
    for (auto& [tid, ls] : per_thread) {
      std::sort(ls.begin(), ls.end(), [](const TracedLaunch* a, const TracedLaunch* b) {
        return a->record.seq < b->record.seq;
      });
      add_phase_spans(ls, events);
      for (const TracedLaunch* l : ls) {
        start = std::min(start, l->record.start_us);
        end = std::max(end, l->record.end_us);
        pid = pid_of(l->record.info.device);
      }
    }
    events.push_back(
        span_event("step " + std::to_string(step), "step", start, end, pid,
                   per_thread.count(step_tid_) ? step_tid_ : per_thread.begin()->first));
  }
  add_flows(launches_, events);
  for (const HostSpan& h : host_spans_) {
    nlohmann::json e =
        span_event(h.name, "host", h.start_us, h.end_us, pid_of(h.device), kHostWorkTid);
    e["args"] = {{"phase", h.phase}, {"step", h.step}};
    events.push_back(e);
    tracks.insert({pid_of(h.device), kHostWorkTid});
    processes.try_emplace(pid_of(h.device), h.device.str());
  }
  for (const nlohmann::json& c : counters_) events.push_back(c);
  for (const auto& [pid, name] : processes)
    events.push_back(name_event("process_name", name, pid, 0));
  for (const auto& [pid, tid] : tracks)
    events.push_back(name_event("thread_name",
                                tid >= kStreamTidBase
                                    ? "stream " + std::to_string(tid - kStreamTidBase)
                                : tid == kHostWorkTid ? std::string("host work")
                                                      : "host thread " + std::to_string(tid),
                                pid, tid));
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void TraceRecorder::write(const std::string& path) const {
  write_file_atomic(path, to_json().dump());
}

}  // namespace glass
