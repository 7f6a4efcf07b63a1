// WordMutex: a mutex in one atomic word, for locks taken on every eager op (the allocator's).
//
// Uncontended, lock() is one compare-and-swap and unlock() one exchange: about a tenth of the
// instructions of pthread_mutex_lock/unlock, which check the mutex's type and robustness on every
// call. Contended, a thread does not spin: it marks the word "locked, with waiters" and sleeps in
// the kernel (std::atomic::wait, a futex on Linux) until unlock() wakes one waiter. So on a busy
// machine a waiting thread yields its core instead of burning it.
//
// The word: 0 free, 1 locked, 2 locked and a thread may be waiting (Drepper, "Futexes Are Tricky",
// mutex 2). Not recursive; usable with std::lock_guard.
#pragma once

#include <atomic>
#include <cstdint>

namespace glass {

class WordMutex {
 public:
  void lock() {
    uint32_t expected = 0;
    if (!word_.compare_exchange_strong(expected, 1, std::memory_order_acquire)) lock_contended();
  }
  void unlock() {
    if (word_.exchange(0, std::memory_order_release) == 2) word_.notify_one();
  }

 private:
  // Sets the word to 2 and sleeps while another thread holds it; returns holding the lock (the
  // word stays 2: a waiter may remain, so our unlock must wake one).
  void lock_contended() {
    while (word_.exchange(2, std::memory_order_acquire) != 0)
      word_.wait(2, std::memory_order_relaxed);
  }

  std::atomic<uint32_t> word_{0};
};

}  // namespace glass
