// The OS threads that run the blocks of a grid: the launching thread plus a fixed set of helpers
// that sleep between launches.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace glass::emu::detail {

class WorkerPool {
 public:
  // `threads` OS threads in all, the caller of run() included.
  explicit WorkerPool(unsigned threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  unsigned threads() const { return static_cast<unsigned>(helpers_.size()) + 1; }

  // Runs task() on the calling thread and on `helpers` helper threads at the same time, and
  // returns when all calls have returned. task must not throw. One run() at a time.
  void run(unsigned helpers, const std::function<void()>& task);

 private:
  void helper_loop(unsigned index);

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void()>* task_ = nullptr;
  uint64_t generation_ = 0;  // one per run(): a helper runs each generation at most once
  unsigned wanted_ = 0;      // helpers with index < wanted_ take part in this generation
  unsigned running_ = 0;
  bool stop_ = false;
};

}  // namespace glass::emu::detail
