// Stream and Event: an in-order queue of work on a device, and a point in it that others can wait
// for. Data parallelism runs gradient all-reduces on a side stream while backward goes on.
//
// On `cpu` and `emu` a side stream is a worker thread that runs its queue in order; launches made
// there carry the stream's id (LaunchInfo::stream), so a trace draws them on a lane of their own.
// The default stream (id 0) is the calling thread itself: work given to it runs at once.
// On `cuda` (GLASS_HAS_CUDA) a side stream wraps a cudaStream_t and an Event a cudaEvent_t: work
// given to the stream runs at once on the host and issues asynchronous GPU work onto native().
//
// A task that throws poisons its stream: later tasks are skipped, and the error is rethrown by
// synchronize() and by every Event recorded after it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/device.h"

namespace glass {

class Event;

class Stream {
 public:
  // A side stream on `device`, with a fresh id (> 0).
  explicit Stream(Device device);
  ~Stream();  // waits for the queued work (errors are dropped: call synchronize() to see them)
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int id() const { return id_; }
  Device device() const { return device_; }
  void* native() const { return native_; }  // cudaStream_t on cuda, null on host devices

  // Runs `work` after everything given to this stream before it.
  void enqueue(std::function<void()> work);
  // Blocks until the queue is empty; rethrows the error of a failed task.
  void synchronize();
  // Work given to this stream from now on waits until `event` has completed.
  void wait(const Event& event);
  // Work given to this stream from now on waits for the work the calling thread has issued so
  // far. On cpu/emu nothing to do (a kernel has finished when launch() returns); on cuda the GPU
  // work queued on the thread's current stream.
  void wait_for_calling_thread();

 private:
  friend class Event;
  struct Queue;
  void run_worker();
  void push(std::function<void()> work, bool runs_after_error);

  Device device_;
  int id_;
  void* native_ = nullptr;
  std::shared_ptr<Queue> queue_;
  std::thread worker_;
};

class Event {
 public:
  Event();
  // Marks the current end of `stream`: the event completes when everything before it has run.
  void record(Stream& stream);
  // True when it has completed (or was never recorded).
  bool query() const;
  // Blocks until it completes; rethrows the error of a failed task before it.
  void synchronize() const;
  // Like synchronize(), but gives up after `timeout` and returns false.
  bool wait_for(std::chrono::duration<double> timeout) const;

 private:
  friend class Stream;
  struct State;
  std::shared_ptr<State> state_;
  void* native_ = nullptr;  // cudaEvent_t on cuda
  Device device_ = kCPU;    // of the stream last recorded on (host syncs are counted per device)
};

}  // namespace glass
