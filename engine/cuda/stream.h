// CUDA streams and events as RAII objects, and the calling thread's current stream.
//
// These are the CUDA handles under the engine's one stream mechanism, glass::Stream
// (engine/stream.h): a glass::Stream on cuda owns a cuda::Stream, made on its GPU, and its worker
// thread has it current. The caching allocator and the launch timer use cuda::Event directly.
//
// Kernels of kernels/cuda, cuBLAS calls and tensor transfers are queued on the current stream
// (the legacy default stream unless a StreamGuard says otherwise); LaunchInfo.stream carries its
// id (0 for the default stream, 1, 2, ... for Streams in creation order), so that a trace shows
// one row per stream. Work on one stream runs in order; work on two streams is ordered only by
// events (Event::record on one, Stream::wait on the other).
#pragma once

#include <cuda_runtime_api.h>

namespace glass::cuda {

class Stream {
 public:
  // A new non-blocking stream (it does not synchronise with the legacy default stream) on the
  // current device; `id` is the glass::Stream's, for LaunchInfo.stream.
  explicit Stream(int id);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t handle() const { return handle_; }
  int id() const { return id_; }
  // Queues on this stream a wait for everything recorded in `event` (the host does not block).
  void wait(cudaEvent_t event) const;
  // Blocks the host until all work queued on this stream has finished.
  void synchronize() const;

 private:
  cudaStream_t handle_ = nullptr;
  int id_ = 0;
};

class Event {
 public:
  // timing = false creates a cheaper event that can only order work, not time it.
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t handle() const { return handle_; }
  // Captures the work queued on `stream` so far.
  void record(cudaStream_t stream);
  // Whether that work has finished (does not block).
  bool done() const;
  void synchronize() const;
  // Milliseconds between `start` and this event (both timing events, both finished).
  float elapsed_ms_since(const Event& start) const;

 private:
  cudaEvent_t handle_ = nullptr;
};

// The calling thread's current stream and its id.
cudaStream_t current_stream();
int current_stream_id();

// Makes `stream` current on this thread for the guard's scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  cudaStream_t saved_handle_;
  int saved_id_;
};

// Blocks until all work queued on the current stream has finished.
void synchronize_current_stream();

}  // namespace glass::cuda
