#include "engine/emu/worker_pool.h"

#include <algorithm>

namespace glass::emu::detail {

WorkerPool::WorkerPool(unsigned threads) {
  for (unsigned i = 0; i + 1 < threads; ++i) helpers_.emplace_back([this, i] { helper_loop(i); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void WorkerPool::run(unsigned helpers, const std::function<void()>& task) {
  helpers = std::min(helpers, static_cast<unsigned>(helpers_.size()));
  if (helpers == 0) {
    task();
    return;
  }
  {
    std::lock_guard lock(mutex_);
    task_ = &task;
    wanted_ = helpers;
    running_ = helpers;
    ++generation_;
  }
  wake_.notify_all();
  task();
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return running_ == 0; });
}

void WorkerPool::helper_loop(unsigned index) {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= wanted_) continue;
    const std::function<void()>* task = task_;
    lock.unlock();
    (*task)();
    lock.lock();
    if (--running_ == 0) done_.notify_one();
  }
}

}  // namespace glass::emu::detail
