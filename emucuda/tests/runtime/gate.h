// A "long-running kernel" for the emulated-runtime tests: an operation queued on a stream of the
// emulated CUDA runtime that does not finish until the test opens the gate, so a test can hold a
// stream busy and look at what the host may and may not see meanwhile.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emucuda/runtime/runtime.h"

namespace glass::testing {

class Gate {
 public:
  // Queues on `stream` an operation named `what` that uses `accesses` and runs `then` once the gate
  // is open.
  void queue_on(cudaStream_t stream, std::string what, std::vector<emu::runtime::Access> accesses,
                std::function<void()> then = {}) {
    auto state = state_;
    ASSERT_EQ(emu::runtime::enqueue(stream, std::move(what), std::move(accesses),
                                    [state, then] {
                                      std::unique_lock lock(state->mu);
                                      state->cv.wait(lock, [&] { return state->open; });
                                      lock.unlock();
                                      if (then) then();
                                    }),
              cudaSuccess);
  }
  void open() {
    std::lock_guard lock(state_->mu);
    state_->open = true;
    state_->cv.notify_all();
  }
  ~Gate() { open(); }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace glass::testing
