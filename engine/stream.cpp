#include "engine/stream.h"

#include <atomic>

#include "engine/error.h"
#include "engine/launch.h"

#if GLASS_HAS_CUDA
#include <cuda_runtime.h>

#include "engine/cuda/stream.h"
#endif

namespace glass {

// What an Event waits for on host devices: a flag set by the stream's worker, and the stream's
// error if a task before it failed.
struct Event::State {
  std::mutex mu;
  std::condition_variable cv;
  bool done = true;
  std::exception_ptr error;

  void complete(std::exception_ptr e) {
    std::lock_guard lock(mu);
    done = true;
    error = e;
    cv.notify_all();
  }
};

struct Stream::Queue {
  std::mutex mu;
  std::condition_variable cv;
  struct Task {
    std::function<void()> work;
    bool runs_after_error;  // event markers complete even on a poisoned stream
  };
  std::deque<Task> tasks;
  bool running = false;  // the worker is inside a task
  bool stop = false;
  std::exception_ptr error;  // the first task that threw; later tasks are skipped
};

namespace {
std::atomic<int> next_stream_id{1};

bool is_cuda(Device d) {
#if GLASS_HAS_CUDA
  return d.kind == DeviceKind::cuda;
#else
  (void)d;
  return false;
#endif
}

#if GLASS_HAS_CUDA
void cuda_check(cudaError_t e, const char* what) {
  GLASS_CHECK(e == cudaSuccess, "{}: {}", what, cudaGetErrorString(e));
}
#endif
}  // namespace

Stream::Stream(Device device) : device_(device), id_(next_stream_id++) {
  if (is_cuda(device_)) {
#if GLASS_HAS_CUDA
    cudaStream_t s;
    cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    native_ = s;
#endif
    return;
  }
  queue_ = std::make_shared<Queue>();
  worker_ = std::thread([this] { run_worker(); });
}

Stream::~Stream() {
#if GLASS_HAS_CUDA
  if (native_) cudaStreamDestroy(static_cast<cudaStream_t>(native_));
#endif
  if (!queue_) return;
  {
    std::lock_guard lock(queue_->mu);
    queue_->stop = true;
  }
  queue_->cv.notify_all();
  worker_.join();
}

void Stream::run_worker() {
  Queue& q = *queue_;
  std::unique_lock lock(q.mu);
  for (;;) {
    q.cv.wait(lock, [&] { return q.stop || !q.tasks.empty(); });
    if (q.tasks.empty()) return;  // stopping, and everything has run
    std::function<void()> task = std::move(q.tasks.front().work);
    const bool skip = q.error != nullptr && !q.tasks.front().runs_after_error;
    q.tasks.pop_front();
    q.running = true;
    lock.unlock();
    std::exception_ptr error;
    if (!skip) {
      try {
        task();
      } catch (...) {
        error = std::current_exception();
      }
    }
    task = nullptr;  // captured state goes before the stream counts as idle
    lock.lock();
    if (error && !q.error) q.error = error;
    q.running = false;
    q.cv.notify_all();
  }
}

void Stream::enqueue(std::function<void()> work) {
  if (!queue_) {  // cuda: the host part runs now and issues onto native()
    work();
    return;
  }
  push(std::move(work), false);
}

void Stream::push(std::function<void()> work, bool runs_after_error) {
  {
    std::lock_guard lock(queue_->mu);
    queue_->tasks.push_back({std::move(work), runs_after_error});
  }
  queue_->cv.notify_all();
}

void Stream::synchronize() {
  note_host_sync(device_, "Stream::synchronize");
  if (!queue_) {
#if GLASS_HAS_CUDA
    cuda_check(cudaStreamSynchronize(static_cast<cudaStream_t>(native_)), "cudaStreamSynchronize");
#endif
    return;
  }
  std::unique_lock lock(queue_->mu);
  queue_->cv.wait(lock, [&] { return queue_->tasks.empty() && !queue_->running; });
  if (queue_->error) std::rethrow_exception(queue_->error);
}

void Stream::wait(const Event& event) {
#if GLASS_HAS_CUDA
  if (!queue_) {
    if (event.native_)
      cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(native_),
                                     static_cast<cudaEvent_t>(event.native_), 0),
                 "cudaStreamWaitEvent");
    return;
  }
#endif
  std::shared_ptr<Event::State> state = event.state_;
  enqueue([state] {
    std::unique_lock lock(state->mu);
    state->cv.wait(lock, [&] { return state->done; });
    if (state->error) std::rethrow_exception(state->error);
  });
}

void Stream::wait_for_calling_thread() {
#if GLASS_HAS_CUDA
  if (is_cuda(device_)) {
    // The work already queued on this thread's current stream (engine/cuda/stream.h), e.g. the
    // backward kernels that wrote a gradient, must finish before what is queued here next.
    cudaEvent_t done;
    cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventRecord(done, cuda::current_stream()), "cudaEventRecord");
    cuda_check(cudaStreamWaitEvent(static_cast<cudaStream_t>(native_), done, 0),
               "cudaStreamWaitEvent");
    cuda_check(cudaEventDestroy(done), "cudaEventDestroy");  // freed once the wait is resolved
  }
#endif
}

Event::Event() : state_(std::make_shared<State>()) {}

void Event::record(Stream& stream) {
  device_ = stream.device();
#if GLASS_HAS_CUDA
  if (!stream.queue_) {
    if (!native_) {
      cudaEvent_t e;
      cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      native_ = e;
    }
    cuda_check(cudaEventRecord(static_cast<cudaEvent_t>(native_),
                               static_cast<cudaStream_t>(stream.native_)),
               "cudaEventRecord");
    return;
  }
#endif
  // A fresh state per record: waiters of an earlier record keep theirs.
  auto state = std::make_shared<State>();
  state->done = false;
  state_ = state;
  std::shared_ptr<Stream::Queue> queue = stream.queue_;
  stream.push(
      [state, queue] {
        std::exception_ptr error;
        {
          std::lock_guard lock(queue->mu);
          error = queue->error;
        }
        state->complete(error);
      },
      true);
}

bool Event::query() const {
#if GLASS_HAS_CUDA
  if (native_) return cudaEventQuery(static_cast<cudaEvent_t>(native_)) == cudaSuccess;
#endif
  std::lock_guard lock(state_->mu);
  return state_->done;
}

bool Event::wait_for(std::chrono::duration<double> timeout) const {
#if GLASS_HAS_CUDA
  if (native_) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!query())
      if (std::chrono::steady_clock::now() > deadline) return false;
    return true;
  }
#endif
  std::unique_lock lock(state_->mu);
  if (!state_->cv.wait_for(lock, timeout, [&] { return state_->done; })) return false;
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

void Event::synchronize() const {
  note_host_sync(device_, "Event::synchronize");
#if GLASS_HAS_CUDA
  if (native_) {
    cuda_check(cudaEventSynchronize(static_cast<cudaEvent_t>(native_)), "cudaEventSynchronize");
    return;
  }
#endif
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

}  // namespace glass
