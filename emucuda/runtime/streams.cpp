#include "emucuda/runtime/streams.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>

#include "emucuda/runtime/capture.h"
#include "emucuda/runtime/runtime.h"

// cudaStream_t is a pointer to this (an incomplete type in the CUDA headers).
struct CUstream_st {
  int device = 0;
  int id = 0;             // 0 for a legacy stream, then 1, 2, ... in creation order
  bool legacy = false;    // the GPU's legacy default stream (cudaStream_t 0)
  bool blocking = false;  // synchronises with the legacy stream (made without NonBlocking)
  bool destroyed = false;
  std::deque<glass::emu::runtime::Operation> queue;
  std::optional<glass::emu::runtime::Operation> running;
  uint64_t enqueued = 0, completed = 0;
  std::thread worker;
};

namespace glass::emu::runtime {

namespace {

// The state lives until the process ends and is never destroyed: the stream workers are detached
// and may still wait on it while static destructors run (destroying a condition variable that
// has waiters blocks in glibc).
struct State {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::unique_ptr<Gpu>> gpus;
  std::map<uintptr_t, size_t> allocations;  // device allocations by start: bytes
  std::vector<std::string> reports;
  int next_stream_id = 1;
  // Destroyed streams: their workers have returned or will once drained; events recorded on them
  // still point to them.
  std::vector<std::unique_ptr<CUstream_st>> retired;
};
State& state() {
  static State* s = new State;
  return *s;
}

std::optional<uint64_t> delay_seed() {
  static const std::optional<uint64_t> seed = []() -> std::optional<uint64_t> {
    const char* v = std::getenv("GLASS_EMU_STREAM_DELAY_SEED");
    if (v == nullptr || *v == 0) return std::nullopt;
    return std::strtoull(v, nullptr, 10);
  }();
  return seed;
}

// splitmix64: a seeded, well-mixed number per (stream, operation).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool dependencies_met_locked(const Operation& op) {
  for (const Dependency& d : op.waits)
    if (!has_run_locked(d)) return false;
  return true;
}

std::string describe_stream(const CUstream_st* s) {
  return s->legacy ? "the default stream of cuda:" + std::to_string(s->device)
                   : "stream " + std::to_string(s->id) + " of cuda:" + std::to_string(s->device);
}

bool overlaps(const Range& a, const Range& b) { return a.begin < b.end && b.begin < a.end; }

// With the stream check on: a copy to the host that runs while an operation of another stream
// that writes the same memory is queued or running (so nothing orders the two).
void check_host_read_locked(const CUstream_st* self, const Operation& op) {
  for (const auto& g : state().gpus) {
    if (!g) continue;
    for (const CUstream_st* s : g->streams) {
      if (s == self) continue;
      auto check = [&](const Operation& other) {
        for (const Range& r : op.ranges)
          for (const Range& w : other.ranges)
            if (w.writes && overlaps(r, w))
              add_report("host read of device memory " + std::to_string(r.end - r.begin) +
                         " bytes at " + std::to_string(r.begin) + " (" + op.what + " on " +
                         describe_stream(self) + ") while " + other.what + " on " +
                         describe_stream(s) + ", not yet finished, writes it");
      };
      if (s->running) check(*s->running);
      for (const Operation& other : s->queue) check(other);
    }
  }
}

void run_worker(CUstream_st* s) {
  std::unique_lock lock(state_mutex());
  for (;;) {
    state_changed().wait(lock, [&] {
      return (s->destroyed && s->queue.empty()) ||
             (!s->queue.empty() && dependencies_met_locked(s->queue.front()));
    });
    if (s->queue.empty()) return;  // destroyed, and everything has run
    s->running = std::move(s->queue.front());
    s->queue.pop_front();
    Operation& op = *s->running;
    const uint64_t seq = op.seq;
    Gpu& gpu = gpu_locked(s->device);
    const bool skip = gpu.sticky != cudaSuccess;  // a faulted GPU runs nothing more
    if (op.host_read && stream_check_enabled()) check_host_read_locked(s, op);
    lock.unlock();
    if (const auto seed = delay_seed())
      std::this_thread::sleep_for(std::chrono::microseconds(
          mix(*seed ^ (uint64_t(s->id) << 40) ^ (uint64_t(s->device) << 56) ^ op.seq) % 500));
    std::string failure;
    if (!skip && op.work) {
      try {
        op.work();
      } catch (const std::exception& e) {
        failure = e.what();
      } catch (...) {
        failure = "unknown exception";
      }
    }
    if (!failure.empty())
      std::fprintf(stderr, "glass emulated CUDA runtime: %s on %s failed: %s\n", op.what.c_str(),
                   describe_stream(s).c_str(), failure.c_str());
    // The work's captures go before the operation counts as run.
    op.work = nullptr;
    lock.lock();
    if (!failure.empty() && gpu.sticky == cudaSuccess) gpu.sticky = cudaErrorLaunchFailure;
    s->running.reset();
    s->completed = seq;
    state_changed().notify_all();
  }
}

}  // namespace

std::mutex& state_mutex() { return state().mutex; }

std::condition_variable& state_changed() { return state().changed; }

int gpu_count() {
  static const int n = [] {
    const char* v = std::getenv("GLASS_EMU_GPUS");
    if (v == nullptr || *v == 0) return 1;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end != 0 || n < 0 || n > 64) {
      std::fprintf(stderr, "GLASS_EMU_GPUS='%s': expected a number of GPUs from 0 to 64\n", v);
      std::exit(2);
    }
    return static_cast<int>(n);
  }();
  return n;
}

int& current_device() {
  thread_local int device = 0;
  return device;
}

CUstream_st* create_stream_locked(int device, bool non_blocking, bool legacy);

Gpu& gpu_locked(int device) {
  if (state().gpus.empty()) state().gpus.resize(gpu_count());
  std::unique_ptr<Gpu>& g = state().gpus.at(device);
  if (!g) {
    g = std::make_unique<Gpu>();
    g->legacy = create_stream_locked(device, false, true);
  }
  return *g;
}

CUstream_st* create_stream_locked(int device, bool non_blocking, bool legacy) {
  auto* s = new CUstream_st;
  s->device = device;
  s->legacy = legacy;
  s->blocking = !non_blocking && !legacy;
  s->id = legacy ? 0 : state().next_stream_id++;
  if (legacy)
    state().gpus.at(device)->streams.insert(state().gpus.at(device)->streams.begin(), s);
  else
    gpu_locked(device).streams.push_back(s);
  s->worker = std::thread(run_worker, s);
  s->worker.detach();  // it ends by itself once the stream is destroyed and drained
  return s;
}

CUstream_st* create_stream(int device, bool non_blocking) {
  std::lock_guard lock(state_mutex());
  return create_stream_locked(device, non_blocking, false);
}

void destroy_stream(CUstream_st* s) {
  std::lock_guard lock(state_mutex());
  auto& list = gpu_locked(s->device).streams;
  std::erase(list, s);
  s->destroyed = true;  // the worker drains the queue and returns
  state().retired.emplace_back(s);
  state_changed().notify_all();
}

CUstream_st* resolve_locked(cudaStream_t stream) {
  return stream != nullptr ? stream : gpu_locked(current_device()).legacy;
}

int stream_device(const CUstream_st* s) { return s->device; }
int stream_id(const CUstream_st* s) { return s->id; }

bool has_run_locked(Dependency d) { return d.stream == nullptr || d.stream->completed >= d.seq; }

Dependency push_locked(CUstream_st* s, Operation op) {
  // A capturing stream records the operation into its graph instead (graphs.cpp): nothing runs,
  // and nothing will wait for it.
  if (capture_locked(s, op)) return {nullptr, 0};
  Gpu& gpu = gpu_locked(s->device);
  // The legacy default stream waits for what the blocking streams of its GPU have queued, and a
  // blocking stream for what the legacy stream has queued.
  if (s->legacy) {
    for (CUstream_st* other : gpu.streams)
      if (other->blocking && other->enqueued > other->completed)
        op.waits.push_back({other, other->enqueued});
  } else if (s->blocking && gpu.legacy->enqueued > gpu.legacy->completed) {
    op.waits.push_back({gpu.legacy, gpu.legacy->enqueued});
  }
  op.seq = ++s->enqueued;
  s->queue.push_back(std::move(op));
  state_changed().notify_all();
  return {s, s->enqueued};
}

void push_wait_locked(CUstream_st* s, Dependency d) {
  if (has_run_locked(d)) return;
  Operation op;
  op.what = "a wait for an event";
  op.waits.push_back(d);
  push_locked(s, std::move(op));
}

void wait_until(Dependency d) {
  std::unique_lock lock(state_mutex());
  state_changed().wait(lock, [&] { return has_run_locked(d); });
}

void add_allocation(const void* p, size_t bytes) {
  std::lock_guard lock(state_mutex());
  state().allocations[reinterpret_cast<uintptr_t>(p)] = bytes;
}

void remove_allocation(const void* p) {
  std::lock_guard lock(state_mutex());
  state().allocations.erase(reinterpret_cast<uintptr_t>(p));
}

std::vector<Range> ranges_locked(const std::vector<Access>& accesses) {
  std::vector<Range> out;
  for (const Access& a : accesses) {
    const auto p = reinterpret_cast<uintptr_t>(a.pointer);
    auto it = state().allocations.upper_bound(p);
    if (it == state().allocations.begin()) continue;
    --it;
    if (p >= it->first + std::max<size_t>(it->second, 1)) continue;  // not device memory
    out.push_back({it->first, it->first + it->second, a.writes});
  }
  return out;
}

bool stream_check_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("GLASS_EMU_STREAM_CHECK");
    return v != nullptr && std::string(v) == "1";
  }();
  return on;
}

void add_report(std::string text) {
  std::fprintf(stderr, "glass emulated CUDA runtime: stream check: %s\n", text.c_str());
  state().reports.push_back(std::move(text));
}

std::vector<std::string> take_stream_reports() {
  std::lock_guard lock(state_mutex());
  std::vector<std::string> out;
  out.swap(state().reports);
  return out;
}

void check_block_release(const void* pointer, size_t bytes, cudaStream_t stream) {
  if (!stream_check_enabled()) return;
  std::lock_guard lock(state_mutex());
  const CUstream_st* self = resolve_locked(stream);
  const Range block{reinterpret_cast<uintptr_t>(pointer),
                    reinterpret_cast<uintptr_t>(pointer) + bytes, true};
  for (const auto& g : state().gpus) {
    if (!g) continue;
    for (const CUstream_st* s : g->streams) {
      if (s == self) continue;
      auto check = [&](const Operation& op) {
        for (const Range& r : op.ranges)
          if (overlaps(r, block)) {
            add_report("free of device memory " + std::to_string(bytes) + " bytes at " +
                       std::to_string(block.begin) + " while " + describe_stream(self) +
                       " is current, but " + op.what + " on " + describe_stream(s) +
                       ", not yet finished, uses it");
            return;
          }
      };
      if (s->running) check(*s->running);
      for (const Operation& op : s->queue) check(op);
    }
  }
}

cudaError_t enqueue(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                    std::function<void()> work) {
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  if (gpu_locked(s->device).sticky != cudaSuccess) return gpu_locked(s->device).sticky;
  Operation op;
  op.what = std::move(what);
  op.ranges = ranges_locked(accesses);
  op.work = std::move(work);
  push_locked(s, std::move(op));
  return cudaSuccess;
}

}  // namespace glass::emu::runtime
