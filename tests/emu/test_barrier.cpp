// Block barriers and shared memory, and the barrier bugs the emulator must expose.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <vector>

#include "engine/emu/launch.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

using BarrierTest = EmuTest;

constexpr int kBlock = 256;  // blockDim.x of the kernels in sync.cu

// Values whose block sums are exact in float, different for every block.
std::vector<float> ramp(int n) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 97) - 40.0f;
  return x;
}

std::vector<float> reference_block_sums(const std::vector<float>& x, int blocks) {
  std::vector<float> sums(blocks, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) sums[i / kBlock] += x[i];
  return sums;
}

std::vector<float> run_block_sum(void (*kernel)(const float*, float*, int), const char* name,
                                 const std::vector<float>& x) {
  const int n = static_cast<int>(x.size());
  const int blocks = (n + kBlock - 1) / kBlock;
  std::vector<float> sums(blocks, -1.0f);
  launch_kernel(name, kernel, dim3(blocks), dim3(kBlock), 0, x.data(), sums.data(), n);
  return sums;
}

TEST_F(BarrierTest, BlockReduction) {
  const std::vector<float> x = ramp(10 * kBlock + 100);
  EXPECT_EQ(run_block_sum(block_sum, "block_sum", x), reference_block_sums(x, 11));
}

TEST_F(BarrierTest, BlockReductionIsCorrectInShuffledOrders) {
  const std::vector<float> x = ramp(8 * kBlock);
  for (uint64_t seed : {1, 2, 3}) {
    configure([&](Settings& s) { s.shuffle_seed = seed; });
    EXPECT_EQ(run_block_sum(block_sum, "block_sum", x), reference_block_sums(x, 8))
        << "seed " << seed;
  }
}

TEST_F(BarrierTest, MissingBarrierInReductionGivesWrongSums) {
  // Without the barrier, threads 0..127 add s[t + 128] before thread t + 128 wrote it: they get
  // what the previous block on this OS thread left there. Every block holds a different value,
  // so that is always wrong.
  configure([](Settings& s) { s.worker_threads = 1; });
  std::vector<float> x(8 * kBlock);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i / kBlock + 1);
  const std::vector<float> expected = reference_block_sums(x, 8);
  EXPECT_EQ(run_block_sum(block_sum, "block_sum", x), expected);
  for (std::optional<uint64_t> seed : {std::optional<uint64_t>(), std::optional<uint64_t>(7)}) {
    configure([&](Settings& s) { s.shuffle_seed = seed; });
    const std::vector<float> got = run_block_sum(block_sum_missing_barrier, "missing", x);
    for (int b = 0; b < 8; ++b)
      EXPECT_NE(got[b], expected[b]) << "block " << b << ", seed " << seed.value_or(0);
  }
}

TEST_F(BarrierTest, ShuffledOrderExposesBugThatNaturalOrderHides) {
  const int n = 4 * kBlock;
  std::vector<float> x(n), good(n), bad(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i + 1);
  launch_kernel("read_left_neighbour", read_left_neighbour, dim3(4), dim3(kBlock), 0, x.data(),
                good.data());
  for (int i = 0; i < n; ++i) ASSERT_EQ(good[i], x[i % kBlock == 0 ? i : i - 1]);

  // In natural order thread t - 1 always runs before thread t: the bug is invisible.
  launch_kernel("missing", read_left_neighbour_missing_barrier, dim3(4), dim3(kBlock), 0, x.data(),
                bad.data());
  EXPECT_EQ(bad, good);
  // A seeded order starts some thread before its left neighbour.
  configure([](Settings& s) { s.shuffle_seed = 12345; });
  launch_kernel("missing", read_left_neighbour_missing_barrier, dim3(4), dim3(kBlock), 0, x.data(),
                bad.data());
  EXPECT_NE(bad, good);
  // ... while the correct kernel stays correct in that order.
  launch_kernel("read_left_neighbour", read_left_neighbour, dim3(4), dim3(kBlock), 0, x.data(),
                bad.data());
  EXPECT_EQ(bad, good);
}

TEST_F(BarrierTest, DivergentBarrierIsReportedAsDeadlock) {
  std::vector<float> out(64, 0.0f);
  const std::string msg = emu_error_of([&] {
    launch_kernel("divergent_barrier", divergent_barrier, dim3(1), dim3(64), 0, out.data());
  });
  EXPECT_NE(msg.find("kernel 'divergent_barrier' deadlocked in block (0,0,0)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("32 thread(s) wait at __syncthreads() at"), std::string::npos) << msg;
  EXPECT_NE(msg.find("threadIdx (0,0,0) (1,0,0)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("threadIdx (32,0,0) (33,0,0)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sync.cu:"), std::string::npos) << msg;
}

TEST_F(BarrierTest, LaunchesWorkAfterADeadlock) {
  std::vector<float> out(64);
  EXPECT_THROW(
      launch_kernel("divergent_barrier", divergent_barrier, dim3(4), dim3(64), 0, out.data()),
      EmuError);
  const std::vector<float> x = ramp(4 * kBlock);
  EXPECT_EQ(run_block_sum(block_sum, "block_sum", x), reference_block_sums(x, 4));
}

TEST_F(BarrierTest, ExitedThreadsCountAsArrived) {
  const int n = 300;  // the third block of 128 has 44 threads with data
  std::vector<int> x(n);
  std::iota(x.begin(), x.end(), 0);
  // In natural order the threads past the end exit after the others arrived; shuffled, some
  // exit first.
  for (std::optional<uint64_t> seed : {std::optional<uint64_t>(), std::optional<uint64_t>(3)}) {
    configure([&](Settings& s) { s.shuffle_seed = seed; });
    std::vector<int> y(n, -1);
    launch_kernel("early_exit", early_exit_before_barrier, dim3(3), dim3(128), 0, x.data(),
                  y.data(), n);
    for (int i = 0; i < n; ++i) {
      const int first = i / 128 * 128, count = std::min(128, n - first);
      ASSERT_EQ(y[i], first + count - 1 - (i - first)) << "element " << i;
    }
  }
}

TEST_F(BarrierTest, BarrierVotes) {
  std::vector<int> out(5, -1);
  launch_kernel("barrier_votes", barrier_votes, dim3(1), dim3(100), 0, out.data());
  EXPECT_EQ(out[0], 34);  // t = 0, 3, ..., 99
  EXPECT_EQ(out[1], 1);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[3], 1);
  EXPECT_EQ(out[4], 0);
}

TEST_F(BarrierTest, TwoDimensionalBlocksTransposeThroughSharedMemory) {
  const int rows = 70, cols = 45;  // partial tiles in both directions
  std::vector<float> in(rows * cols), out(rows * cols, -1.0f);
  std::iota(in.begin(), in.end(), 0.0f);
  launch_kernel("transpose_tile", transpose_tile, dim3((cols + 31) / 32, (rows + 31) / 32),
                dim3(32, 8), 0, in.data(), out.data(), rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) ASSERT_EQ(out[c * rows + r], in[r * cols + c]);
}

TEST_F(BarrierTest, DynamicSharedMemory) {
  const int n = 1000;
  std::vector<int> x(n), y(n, -1);
  std::iota(x.begin(), x.end(), 0);
  launch_kernel("reverse_dynamic_shared", reverse_dynamic_shared, dim3((n + 127) / 128), dim3(128),
                128 * sizeof(int), x.data(), y.data(), n);
  for (int i = 0; i < n; ++i) {
    const int first = i / 128 * 128, count = std::min(128, n - first);
    ASSERT_EQ(y[i], first + count - 1 - (i - first)) << "element " << i;
  }
}

TEST_F(BarrierTest, DynamicSharedMemoryStartsPoisonedInEveryBlock) {
  configure([](Settings& s) { s.worker_threads = 1; });  // blocks follow each other on one thread
  std::vector<unsigned> out(3 * 64, 0);
  launch_kernel("read_fresh_dynamic_shared", read_fresh_dynamic_shared, dim3(3), dim3(64),
                64 * sizeof(unsigned), out.data());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 0xFFFFFFFFu) << "element " << i;
  float as_float;
  std::memcpy(&as_float, &out[0], sizeof as_float);
  EXPECT_TRUE(std::isnan(as_float));
}

}  // namespace
}  // namespace glass::emu::testing
