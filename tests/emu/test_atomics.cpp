// Atomics from many blocks, which run in parallel on several OS threads.
#include <vector>

#include "engine/emu/launch.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

class AtomicsTest : public EmuTest {
 protected:
  void SetUp() override {
    EmuTest::SetUp();
    configure([](Settings& s) { s.worker_threads = 4; });
  }
};

constexpr int kBlocks = 200, kThreads = 128, kTotal = kBlocks * kThreads;

TEST_F(AtomicsTest, AddMaxMinFromManyBlocks) {
  int i = 0, imax = -1, imin = 1;
  unsigned u = 0;
  unsigned long long ull = 0;
  float f = 0;
  double d = 0;
  launch_kernel("atomic_counters", atomic_counters, dim3(kBlocks), dim3(kThreads), 0, &i, &u, &ull,
                &f, &d, &imax, &imin);
  EXPECT_EQ(i, kTotal);
  EXPECT_EQ(u, 2u * kTotal);
  EXPECT_EQ(ull, (1ull << 33) * kTotal);
  EXPECT_EQ(f, 0.5f * kTotal);
  EXPECT_EQ(d, 0.25 * kTotal);
  EXPECT_EQ(imax, kTotal - 1);
  EXPECT_EQ(imin, -(kTotal - 1));
}

TEST_F(AtomicsTest, CompareAndSwapLoop) {
  int counter = 0;
  launch_kernel("cas_increment", cas_increment, dim3(kBlocks), dim3(kThreads), 0, &counter);
  EXPECT_EQ(counter, kTotal);
}

TEST_F(AtomicsTest, ExchangeHandsBackEveryValueOnce) {
  int slot = -1;
  std::vector<int> seen(kTotal + 1, 0);
  launch_kernel("exchange_ids", exchange_ids, dim3(kBlocks), dim3(kThreads), 0, &slot, seen.data());
  // Each thread got the value some other thread (or the initial -1) left; the last one stays.
  int missing = -1;
  for (int v = -1; v < kTotal; ++v) {
    const int count = seen[v + 1];
    ASSERT_LE(count, 1) << "value " << v << " handed back twice";
    if (count == 0) missing = v;
  }
  EXPECT_EQ(missing, slot);
}

TEST_F(AtomicsTest, IncrementWrapsAtLimit) {
  unsigned counter = 0;
  launch_kernel("wrapping_increment", wrapping_increment, dim3(10), dim3(10), 0, &counter, 6u);
  EXPECT_EQ(counter, 100u % 7);  // counts 0, 1, ..., 6, 0, ...
}

TEST_F(AtomicsTest, BitOperationsSubtractAndDecrement) {
  unsigned set = 0, cleared = ~0u, flipped = 0, down = 3;
  int sub = 100;
  launch_kernel("atomic_bit_ops", atomic_bit_ops, dim3(1), dim3(32), 0, &set, &cleared, &flipped,
                &sub, &down);
  EXPECT_EQ(set, ~0u);
  EXPECT_EQ(cleared, 0u);
  EXPECT_EQ(flipped, 0u);  // flipped 32 times
  EXPECT_EQ(sub, 68);
  EXPECT_EQ(down, 4u);  // 3, 2, 1, 0, then wraps to 10: 32 steps end at 10 - (32 - 4) % 11
}

}  // namespace
}  // namespace glass::emu::testing
