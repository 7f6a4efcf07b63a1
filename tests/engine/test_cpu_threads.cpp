// The cpu kernels' thread pool (kernels/cpu/threads.h): every chunk runs exactly once whatever the
// thread count, nested loops stay on their thread, a chunk's exception reaches the caller, and the
// busy-machine decisions (loop_means_busy, ContentionBackoff) from given inputs and the
// oversubscription check that confirms them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/cpu/threads.h"

namespace {

namespace cpu = glass::kernels::cpu;

// Sets the pool's thread count for a test, restoring it after.
struct Threads {
  int saved = cpu::num_threads();
  explicit Threads(int n) { cpu::set_threads(n); }
  ~Threads() { cpu::set_threads(saved); }
};

TEST(CpuThreads, EveryChunkRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 4}) {
    const Threads pool(threads);
    EXPECT_EQ(cpu::num_threads(), threads);
    for (int64_t chunks : {1, 2, 3, 7, 64, 1000}) {
      for (int round = 0; round < 20; ++round) {  // loops back to back reuse the pool's state
        std::vector<std::atomic<int>> runs(static_cast<size_t>(chunks));
        cpu::parallel_chunks(chunks, [&](int64_t c) { runs[c].fetch_add(1); });
        for (int64_t c = 0; c < chunks; ++c)
          ASSERT_EQ(runs[c].load(), 1) << "chunk " << c << " of " << chunks << ", " << threads
                                       << " threads, round " << round;
      }
    }
  }
}

TEST(CpuThreads, RangesCoverTheLoopOnceAndStartAligned) {
  const Threads pool(3);
  for (int64_t items : {1, 15, 16, 17, 100, 4096 + 5}) {
    for (int64_t align : {1, 16}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(items));
      std::atomic<int> misaligned{0};
      cpu::parallel_ranges(
          items, true,
          [&](int64_t begin, int64_t end) {
            if (begin % align != 0) misaligned.fetch_add(1);
            for (int64_t i = begin; i < end; ++i) seen[i].fetch_add(1);
          },
          align);
      EXPECT_EQ(misaligned.load(), 0) << items << " items, align " << align;
      for (int64_t i = 0; i < items; ++i) ASSERT_EQ(seen[i].load(), 1) << "item " << i;
    }
  }
  // Not parallel: one call over the whole loop, on the calling thread.
  int calls = 0;
  cpu::parallel_ranges(100, false, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
  });
  EXPECT_EQ(calls, 1);
}

TEST(CpuThreads, NestedLoopsRunOnTheirThread) {
  const Threads pool(2);
  EXPECT_FALSE(cpu::in_parallel());
  std::atomic<int> strays{0}, inner_runs{0};
  cpu::parallel_chunks(4, [&](int64_t) {
    EXPECT_TRUE(cpu::in_parallel());
    const std::thread::id me = std::this_thread::get_id();
    cpu::parallel_chunks(8, [&](int64_t) {
      if (std::this_thread::get_id() != me) strays.fetch_add(1);
      inner_runs.fetch_add(1);
    });
  });
  EXPECT_EQ(strays.load(), 0);
  EXPECT_EQ(inner_runs.load(), 32);
  EXPECT_FALSE(cpu::in_parallel());
}

TEST(CpuThreads, AChunksExceptionReachesTheCallerAfterEveryChunk) {
  const Threads pool(2);
  std::atomic<int> runs{0};
  EXPECT_THROW(cpu::parallel_chunks(16,
                                    [&](int64_t c) {
                                      runs.fetch_add(1);
                                      if (c == 5) throw std::runtime_error("chunk 5");
                                    }),
               std::runtime_error);
  EXPECT_EQ(runs.load(), 16);
  // the pool still works
  std::atomic<int> after{0};
  cpu::parallel_chunks(16, [&](int64_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 16);
}

TEST(CpuThreads, ZeroMeansEveryCore) {
  const Threads pool(1);
  const int all = cpu::set_threads(0);
  EXPECT_GE(all, 1);
  EXPECT_EQ(cpu::num_threads(), all);
}

// A loop says "busy" when the caller waited long (longer than its own work) for a worker's
// chunk, or when no worker turned up during a long loop.
TEST(CpuThreads, LoopMeansBusy) {
  EXPECT_FALSE(cpu::loop_means_busy(10e-6, 1, 50e-6));  // short wait: a worker finishing
  EXPECT_FALSE(cpu::loop_means_busy(1e-6, 1, 150e-6));  // under the 200 us floor
  EXPECT_FALSE(cpu::loop_means_busy(5e-3, 4, 1e-3));    // a long loop: a chunk may take that
  EXPECT_TRUE(cpu::loop_means_busy(1e-3, 1, 3e-3));     // a time slice of someone else's
  EXPECT_TRUE(cpu::loop_means_busy(100e-6, 1, 250e-6));
  EXPECT_FALSE(cpu::loop_means_busy(100e-6, 0, 0));  // too short for a worker to wake
  EXPECT_TRUE(cpu::loop_means_busy(2e-3, 0, 0));     // 2 ms and no worker came
  EXPECT_FALSE(cpu::loop_means_busy(2e-3, 1, 0));    // one did
}

// The confirmation a starved loop needs: the kernel's CPU pressure (or, without it, its count of
// runnable threads). With more spinning threads than cores, the machine is oversubscribed whatever
// else runs on it. (That a quiet machine reads as not busy cannot be tested here: ctest runs
// other tests beside this one.)
TEST(CpuThreads, OversubscribedWhileMoreThreadsSpinThanCores) {
  const int runnable = cpu::runnable_threads_now();
  if (runnable < 0) GTEST_SKIP() << "this system does not count runnable threads (/proc/loadavg)";
  EXPECT_GE(runnable, 1);  // this thread
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < cores + 1; ++i)
    spinners.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  bool seen = false;  // readings 10 ms apart (intervals under 5 ms are not judged), for up to 2 s
  for (int i = 0; i < 200 && !seen; ++i) {
    seen = cpu::machine_oversubscribed_now();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (std::thread& t : spinners) t.join();
  EXPECT_TRUE(seen) << "cores + 1 spinning threads and the caller: " << cores + 2
                    << " runnable, more than " << cores << " cores";
}

// The share of an interval spent stalled, from two cumulative readings: judged only over
// kStallMinIntervalSeconds to kStallWindowSeconds, and never outside [0, 1].
TEST(CpuThreads, StallShareIsTheStallOverTheInterval) {
  EXPECT_DOUBLE_EQ(cpu::stall_share(10.0, 5.0, 10.1, 5.05), 0.5);
  EXPECT_DOUBLE_EQ(cpu::stall_share(10.0, 5.0, 10.1, 5.0), 0.0);
  EXPECT_DOUBLE_EQ(cpu::stall_share(10.0, 5.0, 10.1, 5.3), 1.0);  // clamped (rounding in /proc)
  EXPECT_LT(cpu::stall_share(10.0, 5.0, 10.0005, 5.0005), 0);     // too short: no verdict
  EXPECT_LT(cpu::stall_share(10.0, 5.0, 10.0 + 1.5 * cpu::kStallWindowSeconds, 9.0), 0);  // stale
  const double stalled = cpu::cpu_stall_seconds_now();
  if (stalled < 0) GTEST_SKIP() << "this kernel has no CPU pressure file (/proc/pressure/cpu)";
  EXPECT_GE(cpu::cpu_stall_seconds_now(), stalled);  // cumulative
  const double recent = cpu::cpu_pressure_now().recent_share;
  EXPECT_GE(recent, 0.0);
  EXPECT_LE(recent, 1.0);
}

// A window ends once: the pool asks the kernel about it then, and not again until the next.
TEST(CpuThreads, ContentionBackoffWindowEndsOnce) {
  cpu::ContentionBackoff b;
  EXPECT_FALSE(b.window_ended(0.0));  // no window yet
  b.on_busy_wait(1.0);
  EXPECT_FALSE(b.window_ended(1.0 + 0.5 * b.window));  // still serial
  EXPECT_TRUE(b.window_ended(1.0 + 1.01 * b.window));
  EXPECT_FALSE(b.window_ended(1.0 + 1.02 * b.window));
}

TEST(CpuThreads, ContentionBackoffDoublesWhileBusyAndForgets) {
  using B = cpu::ContentionBackoff;
  B b;
  EXPECT_FALSE(b.serial_at(0.0));
  b.on_busy_wait(10.0);
  EXPECT_DOUBLE_EQ(b.window, B::kFirstWindow);
  EXPECT_TRUE(b.serial_at(10.0 + 0.5 * B::kFirstWindow));
  EXPECT_FALSE(b.serial_at(10.0 + 1.01 * B::kFirstWindow));
  b.on_busy_wait(10.5);  // busy again soon after: twice the window
  EXPECT_DOUBLE_EQ(b.window, 2 * B::kFirstWindow);
  EXPECT_TRUE(b.serial_at(10.5 + 1.5 * B::kFirstWindow));
  for (int i = 0; i < 20; ++i) b.on_busy_wait(11.0 + 0.1 * i);  // stays busy: capped
  EXPECT_DOUBLE_EQ(b.window, B::kLongestWindow);
  b.on_busy_wait(100.0);  // quiet for long: starts again from the first window
  EXPECT_DOUBLE_EQ(b.window, B::kFirstWindow);
  EXPECT_FALSE(b.serial_at(100.0 + 1.01 * B::kFirstWindow));
}

}  // namespace
