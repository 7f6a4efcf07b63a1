// Memory over time (reduced for CI): many steps in checkpoint/resume cycles, each cycle a new
// Trainer resuming from the last one's checkpoint. After a warm-up the caching allocator's
// allocated and reserved bytes stop growing: nothing leaks per step, per checkpoint or per resume.
#include <gtest/gtest.h>

#include "engine/allocator.h"
#include "train_testing.h"

namespace glass::train {
namespace {

void soak(const std::string& device) {
  const std::string dir = testing::temp_dir("soak_" + device);
  TrainOptions o = testing::tiny_options();
  o.device = device;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 2;
  o.keep_last = 2;
  o.eval_every = 3;  // evaluation allocates too
  constexpr int kCycles = 6, kWarmup = 2, kStepsPerCycle = 5;
  Allocator& alloc = Allocator::for_device(Device::parse(device));
  std::vector<AllocatorStats> live, after;  // at the end of each cycle, and once it is destroyed
  for (int c = 0; c < kCycles; ++c) {
    o.steps = (c + 1) * kStepsPerCycle;
    o.resume = c == 0 ? "" : dir;
    {
      Trainer t(o);
      t.run();
      ASSERT_EQ(t.step(), o.steps);
      live.push_back(alloc.stats());
    }
    after.push_back(alloc.stats());
  }
  const AllocatorStats& warm = live[kWarmup - 1];
  for (int c = kWarmup; c < kCycles; ++c) {
    SCOPED_TRACE(fmt::format("{}: cycle {} (steps {}..{})", device, c, c * kStepsPerCycle + 1,
                             (c + 1) * kStepsPerCycle));
    EXPECT_LE(live[c].allocated_bytes, warm.allocated_bytes);
    EXPECT_LE(live[c].reserved_bytes, warm.reserved_bytes);
    EXPECT_LE(live[c].peak_reserved_bytes, warm.peak_reserved_bytes);
    // Between trainers everything a trainer allocated has been given back.
    EXPECT_EQ(after[c].allocated_bytes, after[kWarmup - 1].allocated_bytes);
  }
  // And the test is not vacuous: a live trainer does hold memory.
  EXPECT_GT(warm.allocated_bytes, after[kWarmup - 1].allocated_bytes);
}

TEST(Soak, MemoryStopsGrowingAcrossCheckpointResumeCyclesCpu) { soak("cpu"); }

#if defined(GLASS_HAS_EMU)
TEST(Soak, MemoryStopsGrowingAcrossCheckpointResumeCyclesEmu) { soak("emu"); }
#endif

}  // namespace
}  // namespace glass::train
