// Streams and events on host devices: in-order work on a worker thread, launches on the stream's
// lane, errors that poison the stream and reach whoever waits, and waits that can time out.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "engine/launch.h"
#include "engine/stream.h"
#include "tests/testing.h"

namespace glass {
namespace {

TEST(Stream, RunsWorkInOrderOnItsOwnThread) {
  Stream s(kCPU);
  EXPECT_GT(s.id(), 0);
  std::vector<int> order;
  std::thread::id worker;
  for (int i = 0; i < 50; ++i)
    s.enqueue([&, i] {
      order.push_back(i);
      worker = std::this_thread::get_id();
    });
  s.synchronize();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_NE(worker, std::this_thread::get_id());
  Stream other(kEmu);
  EXPECT_NE(other.id(), s.id());
}

TEST(Stream, EventCompletesWhenEverythingBeforeItHasRun) {
  Stream s(kCPU);
  std::atomic<bool> release{false}, ran{false};
  s.enqueue([&] {
    while (!release) std::this_thread::yield();
    ran = true;
  });
  Event e;
  EXPECT_TRUE(e.query());  // never recorded
  e.record(s);
  EXPECT_FALSE(e.query());
  EXPECT_FALSE(e.wait_for(std::chrono::milliseconds(20)));  // time-out: still blocked
  release = true;
  e.synchronize();
  EXPECT_TRUE(ran);
  EXPECT_TRUE(e.query());
}

TEST(Stream, WaitOrdersOneStreamAfterAnEventOfAnother) {
  Stream a(kCPU), b(kCPU);
  std::atomic<bool> release{false};
  std::atomic<int> step{0};
  a.enqueue([&] {
    while (!release) std::this_thread::yield();
    step = 1;
  });
  Event done_a;
  done_a.record(a);
  b.wait(done_a);
  int seen = -1;
  b.enqueue([&] { seen = step; });
  release = true;
  b.synchronize();
  EXPECT_EQ(seen, 1);
}

TEST(Stream, AFailedTaskPoisonsTheStreamAndReachesTheWaiters) {
  Stream s(kCPU);
  bool later_ran = false;
  s.enqueue([] { fail("bucket {} broke", 3); });
  s.enqueue([&] { later_ran = true; });
  Event e;
  e.record(s);
  EXPECT_TRUE(testing::contains_all(testing::error_of([&] { e.synchronize(); }), {"bucket 3"}));
  EXPECT_TRUE(testing::contains_all(testing::error_of([&] { s.synchronize(); }), {"bucket 3"}));
  EXPECT_FALSE(later_ran);
}

TEST(Stream, LaunchesOnTheWorkerCarryTheStreamId) {
  testing::LaunchLog log;
  Stream s(kCPU);
  s.enqueue([&] {
    LaunchInfo info;
    info.kernel = "side_work";
    info.stream = s.id();
    launch(info, [] {});
  });
  s.synchronize();
  ASSERT_EQ(log.records.size(), 1u);
  EXPECT_EQ(log.records[0].info.stream, s.id());
}

}  // namespace
}  // namespace glass
