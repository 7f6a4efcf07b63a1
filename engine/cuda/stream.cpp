#include "engine/cuda/stream.h"

#include "engine/cuda/check.h"

namespace glass::cuda {

namespace {

struct Current {
  cudaStream_t handle = nullptr;  // the legacy default stream
  int id = 0;
};

Current& current() {
  thread_local Current c;
  return c;
}

}  // namespace

Stream::Stream(int id) : id_(id) {
  GLASS_CUDA_CHECK(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking), "Stream");
}

Stream::~Stream() { cudaStreamDestroy(handle_); }  // a destructor must not throw

void Stream::wait(cudaEvent_t event) const {
  GLASS_CUDA_CHECK(cudaStreamWaitEvent(handle_, event, 0), "Stream::wait");
}

void Stream::synchronize() const {
  GLASS_CUDA_CHECK(cudaStreamSynchronize(handle_), "Stream::synchronize");
}

Event::Event(bool timing) {
  GLASS_CUDA_CHECK(
      cudaEventCreateWithFlags(&handle_, timing ? cudaEventDefault : cudaEventDisableTiming),
      "Event");
}

Event::~Event() { cudaEventDestroy(handle_); }

void Event::record(cudaStream_t stream) {
  GLASS_CUDA_CHECK(cudaEventRecord(handle_, stream), "Event::record");
}

bool Event::done() const {
  const cudaError_t err = cudaEventQuery(handle_);
  if (err == cudaErrorNotReady) return false;
  GLASS_CUDA_CHECK(err, "Event::done");
  return true;
}

void Event::synchronize() const {
  GLASS_CUDA_CHECK(cudaEventSynchronize(handle_), "Event::synchronize");
}

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  GLASS_CUDA_CHECK(cudaEventElapsedTime(&ms, start.handle_, handle_), "Event::elapsed_ms_since");
  return ms;
}

cudaStream_t current_stream() { return current().handle; }
int current_stream_id() { return current().id; }

StreamGuard::StreamGuard(const Stream& stream)
    : saved_handle_(current().handle), saved_id_(current().id) {
  current() = {stream.handle(), stream.id()};
}

StreamGuard::~StreamGuard() { current() = {saved_handle_, saved_id_}; }

void synchronize_current_stream() {
  GLASS_CUDA_CHECK(cudaStreamSynchronize(current_stream()), "synchronize_current_stream");
}

}  // namespace glass::cuda
