// GLASS_EMU_RACECHECK and GLASS_EMU_INITCHECK on planted bugs, and their silence on correct
// kernels.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/emu/launch.h"
#include "engine/emu/memory.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

class LaunchChecksTest : public EmuTest {
 protected:
  template <class T>
  static T* device_copy(const std::vector<T>& host) {
    auto* p = static_cast<T*>(device_malloc(host.size() * sizeof(T)));
    std::memcpy(p, host.data(), host.size() * sizeof(T));
    return p;
  }
};

TEST_F(LaunchChecksTest, RacecheckNamesKernelBlockAndAddressOfAMissingBarrier) {
  configure([](Settings& s) { s.race_check = true; });
  const int blocks = 4, n = blocks * 64;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  float* x = device_copy(host);
  auto* y = static_cast<float*>(device_malloc(n * sizeof(float)));
  // The correct kernel (every block meets the barrier) passes, with the right result.
  launch_kernel("neighbour", neighbour_racy_in_one_block, dim3(blocks), dim3(64), 0, x, y, -1);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], host[i % 64 == 0 ? i : i - 1]) << i;
  // Block 2 skips the barrier: its threads read neighbours that may not have written yet.
  const std::string msg = emu_error_of([&] {
    launch_kernel("neighbour", neighbour_racy_in_one_block, dim3(blocks), dim3(64), 0, x, y, 2);
  });
  EXPECT_TRUE(contains(msg, "kernel 'neighbour': data race (GLASS_EMU_RACECHECK) in block (2,0,0)"))
      << msg;
  // The first differing byte lies in y, within block 2's elements [128, 192).
  const size_t at = msg.find("byte offset ");
  ASSERT_NE(at, std::string::npos) << msg;
  const long offset = std::stol(msg.substr(at + 12));
  EXPECT_GE(offset, 128 * 4) << msg;
  EXPECT_LT(offset, 192 * 4) << msg;
  EXPECT_TRUE(contains(msg, "bytes at " + hex(y) + ")")) << msg;
  EXPECT_TRUE(contains(msg, "(address " + hex(reinterpret_cast<char*>(y) + offset) + ")")) << msg;
  device_free(x);
  device_free(y);
}

TEST_F(LaunchChecksTest, RacecheckFindsTheBlockSumMissingBarrier) {
  configure([](Settings& s) { s.race_check = true; });
  std::vector<float> host(512, 1.0f);
  float* x = device_copy(host);
  auto* sums = static_cast<float*>(device_malloc(2 * sizeof(float)));
  EXPECT_NO_THROW(launch_kernel("block_sum", block_sum, dim3(2), dim3(256), 0, x, sums, 512));
  EXPECT_EQ(sums[0], 256.0f);
  EXPECT_EQ(sums[1], 256.0f);
  const std::string msg = emu_error_of([&] {
    launch_kernel("block_sum_missing_barrier", block_sum_missing_barrier, dim3(2), dim3(256), 0, x,
                  sums, 512);
  });
  EXPECT_TRUE(contains(msg, "kernel 'block_sum_missing_barrier': data race")) << msg;
  EXPECT_TRUE(contains(msg, "in block (0,0,0)")) << msg;
  device_free(x);
  device_free(sums);
}

// Float atomics whose sum depends on the order of the adds are no race: the bytes atomics update
// are not compared. x = {1e8, -1e8, 1, 1}: in index order the sum is 2; in reverse order the ones
// are lost in -1e8 + 2 (floats near 1e8 are 8 apart) and it is 0. A plain write in the same launch
// whose value depends on the order is still reported.
TEST_F(LaunchChecksTest, RacecheckLeavesTheOrderOfAtomicsAloneButNotPlainWrites) {
  configure([](Settings& s) { s.race_check = true; });
  float* x = device_copy(std::vector<float>{1e8f, -1e8f, 1.0f, 1.0f});
  float* sum = device_copy(std::vector<float>{0.0f});
  int* last = device_copy(std::vector<int>{-1});
  EXPECT_NO_THROW(launch_kernel("atomic_sum", atomic_sum, dim3(1), dim3(4), 0, x, sum, 4,
                                static_cast<int*>(nullptr)));
  EXPECT_EQ(*sum, 2.0f);  // the configured (natural) order's result, as if run once
  *sum = 0.0f;
  const std::string msg = emu_error_of([&] {
    launch_kernel("atomic_sum_last", atomic_sum, dim3(1), dim3(4), 0, x, sum, 4, last);
  });
  EXPECT_TRUE(contains(msg, "kernel 'atomic_sum_last': data race")) << msg;
  EXPECT_TRUE(contains(msg, "bytes at " + hex(last) + ")")) << msg;
  device_free(x);
  device_free(sum);
  device_free(last);
}

TEST_F(LaunchChecksTest, InitcheckReportsAReadOfNeverWrittenMemory) {
  configure([](Settings& s) { s.init_check = true; });
  const int n = 100;
  auto* x = static_cast<float*>(device_malloc(n * sizeof(float)));
  auto* y = static_cast<float*>(device_malloc(n * sizeof(float)));
  // The host writes x[0..59] only; y is never written before the kernel overwrites it.
  for (int i = 0; i < 60; ++i) x[i] = static_cast<float>(i);
  EXPECT_NO_THROW(launch_kernel("add_one", add_one, dim3(1), dim3(128), 0, x, y, 60));
  for (int i = 0; i < 60; ++i) ASSERT_EQ(y[i], i + 1.0f);
  const std::string msg =
      emu_error_of([&] { launch_kernel("add_one", add_one, dim3(1), dim3(128), 0, x, y, n); });
  EXPECT_TRUE(contains(msg,
                       "kernel 'add_one' read device memory never written since it was "
                       "allocated (GLASS_EMU_INITCHECK)"))
      << msg;
  EXPECT_TRUE(contains(msg, "(400 bytes at " + hex(x) + "), byte offset 240")) << msg;
  // After the report, memory holds what the kernel computed as it was.
  EXPECT_EQ(y[59], 60.0f);
  EXPECT_TRUE(std::isnan(y[60]));
  // Once the host wrote the rest, the same launch is clean.
  for (int i = 60; i < n; ++i) x[i] = 0.0f;
  EXPECT_NO_THROW(launch_kernel("add_one", add_one, dim3(1), dim3(128), 0, x, y, n));
  device_free(x);
  device_free(y);
}

TEST_F(LaunchChecksTest, InitcheckSeesACopyOfNeverWrittenMemory) {
  configure([](Settings& s) { s.init_check = true; });
  auto* x = static_cast<unsigned*>(device_malloc(64 * 4));
  auto* y = static_cast<unsigned*>(device_malloc(64 * 4));
  for (int i = 0; i < 64; ++i) x[i] = (i == 17) ? x[i] : 1u;  // x[17] keeps the fresh pattern
  const std::string msg = emu_error_of(
      [&] { launch_kernel("copy_words", copy_words, dim3(1), dim3(64), 0, x, y, 64); });
  EXPECT_TRUE(contains(msg, "(256 bytes at " + hex(x) + "), byte offset 68")) << msg;
  device_free(x);
  device_free(y);
}

TEST_F(LaunchChecksTest, ChecksLeaveHostMemoryLaunchesAlone) {
  // Writable host memory cannot be snapshotted: the launch runs once, unchecked.
  configure([](Settings& s) {
    s.race_check = true;
    s.init_check = true;
  });
  std::vector<float> x(64, 1.0f), y(64, 0.0f);
  EXPECT_NO_THROW(launch_kernel("add_one", add_one, dim3(1), dim3(64), 0, x.data(), y.data(), 64));
  EXPECT_EQ(y[63], 2.0f);
}

}  // namespace
}  // namespace glass::emu::testing
