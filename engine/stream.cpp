#include "engine/stream.h"

#include <atomic>
#include <optional>

#include "engine/device_runtime.h"
#include "engine/error.h"
#include "engine/launch.h"

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

Stream::Stream(Device device)
    : device_(device),
      id_(next_stream_id++),
      native_(runtime_for(device).make_stream(device, id_)) {
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

void* Stream::native() const { return native_ ? native_->handle() : nullptr; }

void Stream::run_worker() {
  // The worker issues onto this stream's device and native stream: NCCL set-up, collectives,
  // kernels.
  std::shared_ptr<void> current;
  if (native_) {
    try {
      current = native_->make_current();
    } catch (...) {
      // the constructor made the native stream on this device, so it exists; a failure shows in
      // the tasks
    }
  }
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
        // The task's work on the native stream has finished when the stream is idle (throws
        // the fault of a kernel that failed). Nothing to wait for on host devices.
        if (native_) native_->synchronize();
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
  // The work already queued on this thread's current stream (engine/cuda/stream.h), e.g. the
  // backward kernels that wrote a gradient, must finish before what is queued here next. The
  // wait is issued now, on the caller's GPU, and covers everything issued onto native() after.
  if (native_) native_->wait_for_calling_thread();
}

void Stream::issue_in_capture(const std::function<void()>& work) {
  GLASS_CHECK(native_ && capturing_graph(),
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
  const std::shared_ptr<void> current = native_->make_current();
  work();
}

void Stream::join_calling_thread() {
  GLASS_CHECK(native_ != nullptr, "Stream::join_calling_thread: stream {} on {} has no CUDA stream",
              id_, device_.str());
  native_->join_calling_thread();
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
