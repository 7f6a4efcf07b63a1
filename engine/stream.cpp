#include "engine/stream.h"

#include <atomic>
#include <optional>

#include "engine/error.h"
#include "engine/launch.h"

#if GLASS_HAS_CUDA
#include "engine/cuda/check.h"
#include "engine/cuda/runtime.h"
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
}  // namespace

Stream::Stream(Device device) : device_(device), id_(next_stream_id++) {
  if (device_.kind == DeviceKind::cuda) {
#if GLASS_HAS_CUDA
    // The CUDA stream belongs to the GPU current when it is made: this stream's own.
    cuda::DeviceGuard on_gpu(device_.index);
    cuda_ = std::make_shared<cuda::Stream>(id_);
#else
    fail("Stream on {}: this build of glass has no CUDA runtime", device_.str());
#endif
  }
  queue_ = std::make_shared<Queue>();
  worker_ = std::thread([this] { run_worker(); });
}

Stream::~Stream() {
  {
    std::lock_guard lock(queue_->mu);
    queue_->stop = true;
  }
  queue_->cv.notify_all();
  worker_.join();
}

void* Stream::native() const {
#if GLASS_HAS_CUDA
  if (cuda_) return cuda_->handle();
#endif
  return nullptr;
}

// The task's GPU work on cuda: it has finished when the CUDA stream is idle (throws the fault of
// a kernel that failed). Nothing to wait for on host devices.
static void wait_for_device_work(cuda::Stream* stream) {
#if GLASS_HAS_CUDA
  if (stream) stream->synchronize();
#else
  (void)stream;
#endif
}

void Stream::run_worker() {
#if GLASS_HAS_CUDA
  // The worker issues onto this stream's GPU and CUDA stream: NCCL set-up, collectives, kernels.
  std::optional<cuda::StreamGuard> current;
  if (cuda_) {
    try {
      cuda::require_device(device_.index);
    } catch (...) {
      // the constructor made a stream on this GPU, so it exists; a failure shows in the tasks
    }
    current.emplace(*cuda_);
  }
#endif
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
        wait_for_device_work(cuda_.get());
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

void Stream::enqueue(std::function<void()> work) { push(std::move(work), false); }

void Stream::push(std::function<void()> work, bool runs_after_error) {
  {
    std::lock_guard lock(queue_->mu);
    queue_->tasks.push_back({std::move(work), runs_after_error});
  }
  queue_->cv.notify_all();
}

void Stream::synchronize() {
  note_host_sync(device_, "Stream::synchronize");
  std::unique_lock lock(queue_->mu);
  queue_->cv.wait(lock, [&] { return queue_->tasks.empty() && !queue_->running; });
  if (queue_->error) std::rethrow_exception(queue_->error);
}

void Stream::wait(const Event& event) {
  std::shared_ptr<Event::State> state = event.state_;
  enqueue([state] {
    std::unique_lock lock(state->mu);
    state->cv.wait(lock, [&] { return state->done; });
    if (state->error) std::rethrow_exception(state->error);
  });
}

void Stream::wait_for_calling_thread() {
#if GLASS_HAS_CUDA
  if (cuda_) {
    // The work already queued on this thread's current stream (engine/cuda/stream.h), e.g. the
    // backward kernels that wrote a gradient, must finish before what is queued here next. The
    // wait is issued now, on the caller's GPU, and covers everything issued onto native() after.
    cuda::Event done;
    done.record(cuda::current_stream());
    cuda_->wait(done.handle());
  }
#endif
}

void Stream::issue_in_capture(const std::function<void()>& work) {
#if GLASS_HAS_CUDA
  GLASS_CHECK(cuda_ && capturing_graph(),
              "Stream::issue_in_capture: stream {} on {} is not in a CUDA graph capture of the "
              "calling thread",
              id_, device_.str());
  {
    // The worker first: after each task it waits for native() on the host, which would fail the
    // capture once native() is forked into it (work queued before the capture, or the tail of an
    // event's marker task).
    std::unique_lock lock(queue_->mu);
    queue_->cv.wait(lock, [&] { return queue_->tasks.empty() && !queue_->running; });
  }
  wait_for_calling_thread();  // the fork
  const cuda::DeviceGuard on_gpu(device_.index);
  const cuda::StreamGuard current(*cuda_);
  work();
#else
  (void)work;
  fail("Stream::issue_in_capture on {}: this build of glass has no CUDA runtime", device_.str());
#endif
}

void Stream::join_calling_thread() {
#if GLASS_HAS_CUDA
  GLASS_CHECK(cuda_ != nullptr, "Stream::join_calling_thread: stream {} on {} has no CUDA stream",
              id_, device_.str());
  cuda::Event done;
  done.record(cuda_->handle());
  GLASS_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done.handle(), 0),
                   "Stream::join_calling_thread");
#else
  fail("Stream::join_calling_thread on {}: this build of glass has no CUDA runtime", device_.str());
#endif
}

Event::Event() : state_(std::make_shared<State>()) {}

void Event::record(Stream& stream) {
  device_ = stream.device();
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
  std::lock_guard lock(state_->mu);
  return state_->done;
}

bool Event::wait_for(std::chrono::duration<double> timeout) const {
  std::unique_lock lock(state_->mu);
  if (!state_->cv.wait_for(lock, timeout, [&] { return state_->done; })) return false;
  if (state_->error) std::rethrow_exception(state_->error);
  return true;
}

void Event::synchronize() const {
  note_host_sync(device_, "Event::synchronize");
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

}  // namespace glass
