// The emulated GPUs, their streams and events: the state behind cudart.cpp and runtime.h.
// One mutex guards it all (the queues are short, the work runs outside it); one condition
// variable wakes the workers and the synchronising callers whenever an operation completes.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "emucuda/runtime/runtime.h"

namespace glass::emu::runtime {

// "Everything queued on `stream` up to and including operation `seq` has run."
struct Dependency {
  CUstream_st* stream;
  uint64_t seq;
};

// A device range an operation reads or writes (the whole allocation).
struct Range {
  uintptr_t begin, end;
  bool writes;
};

struct Operation {
  uint64_t seq = 0;
  std::string what;
  std::vector<Range> ranges;
  std::vector<Dependency> waits;
  bool host_read = false;  // a copy to host memory: the stream check looks for pending writers
  std::function<void()> work;
};

// The state of one emulated GPU: its legacy default stream, the streams made on it, and its
// sticky error (set by a failed kernel; every synchronising call returns it from then on).
struct Gpu {
  CUstream_st* legacy = nullptr;
  std::vector<CUstream_st*> streams;  // legacy first; destroyed streams are removed
  cudaError_t sticky = cudaSuccess;
};

std::mutex& state_mutex();
std::condition_variable& state_changed();

// The GPU, created on first use with its legacy stream (caller holds state_mutex()).
Gpu& gpu_locked(int device);
// The calling thread's current GPU (cudaSetDevice), 0 by default.
int& current_device();

// A stream on `device`: blocking (synchronises with the legacy stream) unless non_blocking.
CUstream_st* create_stream(int device, bool non_blocking);
// cudaStreamDestroy: the stream runs what it has and then stops; returns at once.
void destroy_stream(CUstream_st* stream);
// nullptr -> the legacy stream of the current GPU (caller holds state_mutex()).
CUstream_st* resolve_locked(cudaStream_t stream);
int stream_device(const CUstream_st* stream);
int stream_id(const CUstream_st* stream);

// Queues an operation; returns the dependency "it has run" (caller holds state_mutex()).
Dependency push_locked(CUstream_st* stream, Operation op);
// Blocks until `d` has run (takes state_mutex()).
void wait_until(Dependency d);
bool has_run_locked(Dependency d);
// Queues an operation that only waits for `d`.
void push_wait_locked(CUstream_st* stream, Dependency d);

// The ranges of the device allocations that `accesses` point into (caller holds state_mutex()).
std::vector<Range> ranges_locked(const std::vector<Access>& accesses);
void add_allocation(const void* p, size_t bytes);
void remove_allocation(const void* p);

// GLASS_EMU_STREAM_CHECK=1 and GLASS_EMU_STREAM_DELAY_SEED=n, read once.
bool stream_check_enabled();
void add_report(std::string text);

}  // namespace glass::emu::runtime
