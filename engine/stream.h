// Stream and Event: an in-order queue of work on a device, and a point in it that others can wait
// for. Data parallelism runs gradient all-reduces on a side stream while backward goes on.
//
// One mechanism on every device: a side stream is a worker thread that runs its queue in order,
// and a task counts as done when everything it did has finished. On `cpu` and `emu` that is when
// the task returns (a launch has finished when it returns). Where the device's runtime has native
// streams (engine/device_runtime.h: `cuda`) the stream also owns one (a CUDA stream,
// engine/cuda/stream.h), made on the stream's own GPU whatever GPU the calling thread has
// current; a task issues asynchronous GPU work onto native() from the worker (on that GPU), and
// the worker then waits for the CUDA stream before the task counts as done and its captures (the
// tensors a collective reads and writes) are released. Launches made there carry the stream's id
// (LaunchInfo::stream), so a trace draws them on a lane of their own.
//
// A task that throws (a kernel fault on cuda included) poisons its stream: later tasks are
// skipped, and the error is rethrown by synchronize() and by every Event recorded after it.
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
class NativeStream;

class Stream {
 public:
  // A side stream on `device`, with a fresh id (> 0).
  explicit Stream(Device device);
  ~Stream();  // waits for the queued work (errors are dropped: call synchronize() to see them)
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int id() const { return id_; }
  Device device() const { return device_; }
  void* native() const;  // cudaStream_t on cuda, null on host devices

  // Runs `work` after everything given to this stream before it; `work` and what it captures are
  // kept until it, and on cuda the GPU work it issued, has finished.
  void enqueue(std::function<void()> work);
  // Blocks until the queue is empty; rethrows the error of a failed task.
  void synchronize();
  // Work given to this stream from now on waits until `event` has completed.
  void wait(const Event& event);
  // Work given to this stream from now on waits for the work the calling thread has issued so
  // far. On cpu/emu nothing to do (a kernel has finished when launch() returns); on cuda the GPU
  // work queued on the thread's current stream.
  void wait_for_calling_thread();

  // CUDA graph capture (engine/cuda/graph.h), cuda only. While the calling thread captures, work
  // given to the worker would run later, outside the capture, and the worker's host wait for the
  // GPU after each task would fail it. So issue_in_capture() forks native() into the capture
  // (native() waits for an event of the capturing stream, as wait_for_calling_thread() does) and
  // runs `work` now, on the calling thread, with native() current: what it issues there is
  // captured, a branch of the graph. It first lets the worker finish what was queued before.
  void issue_in_capture(const std::function<void()>& work);
  // The calling thread's current stream waits for the GPU work issued onto native() so far, on
  // the GPU: the host does not wait. In a capture this is the join of the fork above, which CUDA
  // requires before the capture ends (cudaErrorStreamCaptureUnjoined). cuda only.
  void join_calling_thread();

 private:
  friend class Event;
  struct Queue;
  void run_worker();
  void push(std::function<void()> work, bool runs_after_error);

  Device device_;
  int id_;
  // Where the device has streams of its own (engine/device_runtime.h; a CUDA stream on cuda):
  // the one the tasks issue onto. Null elsewhere.
  std::shared_ptr<NativeStream> native_;
  std::shared_ptr<Queue> queue_;
  std::thread worker_;
};

// A point in a Stream's queue: host state only, on every device (nothing to destroy on the GPU).
class Event {
 public:
  Event();
  // Marks the current end of `stream`: the event completes when everything before it has run.
  void record(Stream& stream);
  // True when it has completed (or was never recorded).
  bool query() const;
  // Blocks until it completes; rethrows the error of a failed task before it.
  void synchronize() const;
  // Like synchronize(), but gives up after `timeout` and returns false. It sleeps while it waits,
  // and a failed task before it (a kernel fault on cuda) is rethrown at once.
  bool wait_for(std::chrono::duration<double> timeout) const;

 private:
  friend class Stream;
  struct State;
  std::shared_ptr<State> state_;
  Device device_ = kCPU;  // of the stream last recorded on (host syncs are counted per device)
};

}  // namespace glass
