// Shared memory: static __shared__ poisoned at every block start, and the per-block limits of
// the emulated GPU (48 KB by default, up to 227 KB after an opt-in), with static shared
// memory counted.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/emu/device_limits.h"
#include "engine/emu/launch.h"
#include "engine/emu/shared_memory_limits.h"
#include "engine/emu/static_shared.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

using SharedMemoryTest = EmuTest;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_F(SharedMemoryTest, StaticSharedIsPoisonedAtEveryBlockStart) {
  // One OS thread runs all 3 blocks, so each block follows one that wrote 7s and 1.0s.
  configure([](Settings& s) { s.worker_threads = 1; });
  std::vector<unsigned> out(3 * 64, 0);
  std::vector<float> f(3 * 64, 0.0f);
  for (int launch = 0; launch < 2; ++launch) {
    launch_kernel("read_static_shared_before_write", read_static_shared_before_write, dim3(3),
                  dim3(64), 0, out.data(), f.data());
    for (int i = 0; i < 3 * 64; ++i) {
      ASSERT_EQ(out[i], 0xFFFFFFFFu) << "launch " << launch << " element " << i;
      ASSERT_TRUE(std::isnan(f[i])) << "launch " << launch << " element " << i;
    }
  }
}

TEST_F(SharedMemoryTest, StaticSharedVariablesAreFoundInTheSymbolTable) {
  bool found = false;
  for (const detail::StaticSharedVariable& v : detail::static_shared_variables())
    if (contains(v.name, "transpose_tile") && contains(v.name, "::tile")) {
      EXPECT_EQ(v.bytes, 32u * 33u * 4u);
      found = true;
    }
  EXPECT_TRUE(found) << "transpose_tile's tile[32][33] is not among the static shared variables";
}

TEST_F(SharedMemoryTest, StaticSharedCountsTowardTheDefaultLimit) {
  std::vector<float> out(64);
  // 40000 static + 9152 dynamic = 49152: exactly the default limit.
  launch_kernel("static_and_dynamic_shared", static_and_dynamic_shared, dim3(1), dim3(64),
                kH200.shared_per_block - 40000, out.data());
  EXPECT_EQ(out[5], 3.0f);
  EXPECT_EQ(max_dynamic_shared_bytes(reinterpret_cast<const void*>(&static_and_dynamic_shared)),
            kH200.shared_per_block - 40000);
  // One more byte does not launch, and the message says what was asked and what the limit is.
  const std::string msg = emu_error_of([&] {
    launch_kernel("static_and_dynamic_shared", static_and_dynamic_shared, dim3(1), dim3(64),
                  kH200.shared_per_block - 40000 + 1, out.data());
  });
  EXPECT_TRUE(contains(msg, "kernel 'static_and_dynamic_shared'")) << msg;
  EXPECT_TRUE(contains(msg, "asks for 49153 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "40000 static")) << msg;
  EXPECT_TRUE(contains(msg, "9153 dynamic")) << msg;
  EXPECT_TRUE(contains(msg, "the limit is 49152 bytes")) << msg;
  // After the opt-in, as cudaFuncSetAttribute would allow on the GPU, it launches.
  set_max_dynamic_shared_bytes(reinterpret_cast<const void*>(&static_and_dynamic_shared),
                               "static_and_dynamic_shared", 100000);
  launch_kernel("static_and_dynamic_shared", static_and_dynamic_shared, dim3(1), dim3(64), 100000,
                out.data());
  EXPECT_EQ(out[63], 3.0f);
  // But not beyond the device's opt-in limit, static bytes included.
  set_max_dynamic_shared_bytes(reinterpret_cast<const void*>(&static_and_dynamic_shared),
                               "static_and_dynamic_shared", kH200.shared_per_block_optin);
  const std::string over = emu_error_of([&] {
    launch_kernel("static_and_dynamic_shared", static_and_dynamic_shared, dim3(1), dim3(64),
                  kH200.shared_per_block_optin, out.data());
  });
  EXPECT_TRUE(contains(over, "the device's limit with opt-in is 232448 bytes")) << over;
}

TEST_F(SharedMemoryTest, DynamicSharedOverTheLimitLaunchesOnlyAfterOptIn) {
  std::vector<float> out(32);
  const size_t bytes = 100 * 1024;
  const std::string msg = emu_error_of([&] {
    launch_kernel("dynamic_shared_a", dynamic_shared_a, dim3(2), dim3(32), bytes, out.data());
  });
  EXPECT_TRUE(contains(msg, "kernel 'dynamic_shared_a': a block asks for 102400 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "the limit is 49152 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "cudaFuncAttributeMaxDynamicSharedMemorySize")) << msg;
  set_max_dynamic_shared_bytes(reinterpret_cast<const void*>(&dynamic_shared_a), "dynamic_shared_a",
                               bytes);
  launch_kernel("dynamic_shared_a", dynamic_shared_a, dim3(2), dim3(32), bytes, out.data());
  EXPECT_EQ(out[31], 3.0f);
  // More than the kernel opted into is refused, as on the GPU.
  const std::string more = emu_error_of([&] {
    launch_kernel("dynamic_shared_a", dynamic_shared_a, dim3(2), dim3(32), bytes + 4, out.data());
  });
  EXPECT_TRUE(contains(more, "the kernel opted into at most 102400 bytes")) << more;
}

TEST_F(SharedMemoryTest, OptInBeyondTheDeviceLimitIsRefused) {
  const void* k = reinterpret_cast<const void*>(&dynamic_shared_b);
  const std::string msg =
      emu_error_of([&] { set_max_dynamic_shared_bytes(k, "dynamic_shared_b", 228 * 1024); });
  EXPECT_TRUE(contains(msg, "kernel 'dynamic_shared_b': cannot opt into 233472 bytes")) << msg;
  EXPECT_TRUE(contains(msg, "opt-in limit is 232448 bytes")) << msg;
  EXPECT_NO_THROW(set_max_dynamic_shared_bytes(k, "dynamic_shared_b", 227 * 1024));
  EXPECT_EQ(max_dynamic_shared_bytes(k), 227u * 1024);
}

TEST_F(SharedMemoryTest, LauncherHelperOptsIn) {
  std::vector<float> out(32);
  const size_t bytes = 64 * 1024;
  EXPECT_FALSE(emu_error_of([&] {
                 launch_kernel("dynamic_shared_c", dynamic_shared_c, dim3(1), dim3(32), bytes,
                               out.data());
               }).empty());
  allow_dynamic_shared_c(bytes);
  launch_kernel("dynamic_shared_c", dynamic_shared_c, dim3(1), dim3(32), bytes, out.data());
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_TRUE(contains(emu_error_of([&] { allow_dynamic_shared_c(300 * 1024); }),
                       "kernel 'dynamic_shared_c': cannot opt into 307200 bytes"));
}

TEST_F(SharedMemoryTest, StaticSharedOverTheLimitIsRefused) {
  std::vector<float> out(32);
  const std::string msg = emu_error_of([&] {
    launch_kernel("too_much_static_shared", too_much_static_shared, dim3(1), dim3(32), 0,
                  out.data());
  });
  EXPECT_TRUE(contains(msg, "kernel 'too_much_static_shared': a block asks for 52000 bytes"))
      << msg;
  EXPECT_TRUE(contains(msg, "huge (52000 bytes)")) << msg;
  // Measured once, the static size is checked before the next launch runs anything.
  out[0] = -1.0f;
  EXPECT_FALSE(emu_error_of([&] {
                 launch_kernel("too_much_static_shared", too_much_static_shared, dim3(1), dim3(32),
                               0, out.data());
               }).empty());
  EXPECT_EQ(out[0], -1.0f);
}

TEST_F(SharedMemoryTest, BlockShapeLimitsComeFromTheDeviceTable) {
  std::vector<float> out(2048);
  const std::string msg = emu_error_of([&] {
    launch_kernel("dynamic_shared_b", dynamic_shared_b, dim3(1),
                  dim3(kH200.max_threads_per_block + 1), 0, out.data());
  });
  EXPECT_TRUE(contains(msg, "a block holds 1..1024 threads")) << msg;
}

}  // namespace
}  // namespace glass::emu::testing
