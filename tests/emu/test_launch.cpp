// Launching: indexing, tails, types, intrinsics, the fast path, and errors out of a launch.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "engine/emu/builtins.h"
#include "engine/emu/device_runtime.h"
#include "engine/emu/launch.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

using LaunchTest = EmuTest;

TEST_F(LaunchTest, ElementwiseCoversTailBlock) {
  const int n = 1000;  // 4 blocks of 256, the last one mostly idle
  std::vector<float> x(n), y(n + 24, -7.0f);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  launch_kernel("scale_add", scale_add, dim3((n + 255) / 256), dim3(256), 0, x.data(), y.data(),
                2.0f, n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(y[i], 2.0f * i - 7.0f) << "element " << i;
  for (int i = n; i < n + 24; ++i) ASSERT_EQ(y[i], -7.0f) << "thread past n wrote element " << i;
}

TEST_F(LaunchTest, EveryThreadOfA3dGridRunsOnce) {
  const dim3 grid(3, 2, 2), block(4, 3, 5);
  std::vector<unsigned> out(3 * 2 * 2 * 4 * 3 * 5, 0);
  launch_kernel("write_thread_ids", write_thread_ids, grid, block, 0, out.data());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 1u) << "slot " << i;
}

TEST_F(LaunchTest, LambdaBodySeesBuiltins) {
  std::vector<int> seen(2 * 64, -1);
  launch_kernel("lambda", dim3(2), dim3(64), 0, [&] {
    seen[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<int>(gridDim.x * 1000 + threadIdx.x);
  });
  for (int i = 0; i < 128; ++i) EXPECT_EQ(seen[i], 2000 + i % 64);
}

TEST_F(LaunchTest, Float4AndBf16FromCudaHeaders) {
  const int n4 = 100;
  std::vector<float> x(4 * n4), back(4 * n4);
  std::vector<__nv_bfloat16> y(4 * n4);
  for (int i = 0; i < 4 * n4; ++i) x[i] = 1.0f + i / 512.0f;  // 1 + i/512 needs 9 bits and more
  launch_kernel("bf16_round_trip", bf16_round_trip, dim3(4), dim3(32), 0,
                reinterpret_cast<const float4*>(x.data()), y.data(), back.data(), n4);
  for (int i = 0; i < 4 * n4; ++i) {
    // bf16 keeps 8 significant bits: relative error at most 2^-8; 1 + k/128 is exact.
    ASSERT_LE(std::fabs(back[i] - x[i]), x[i] / 256.0f) << "element " << i;
    if (i % 4 == 0 && i < 16) {
      EXPECT_EQ(back[i], x[i]);
    }
  }
  EXPECT_NE(back[3], x[3]);  // 1 + 3/512 is not a bf16
}

TEST_F(LaunchTest, MathIntrinsics) {
  float f[8];
  int i[7];
  launch_kernel("math_intrinsics", math_intrinsics, dim3(1), dim3(1), 0, f, i);
  EXPECT_FLOAT_EQ(f[0], std::exp(1.0f));
  EXPECT_EQ(f[1], 0.5f);
  EXPECT_EQ(f[2], 0.125f);
  EXPECT_EQ(f[3], 2.0f);
  EXPECT_EQ(f[4], -2.0f);
  EXPECT_EQ(f[5], 0.0f);
  EXPECT_EQ(f[6], 1.0f);
  EXPECT_EQ(f[7], 1.0f);
  EXPECT_EQ(i[0], 7);
  EXPECT_EQ(i[1], 8);
  EXPECT_EQ(i[2], 4);
  EXPECT_EQ(static_cast<unsigned>(i[3]), 0x80000000u);
  EXPECT_EQ(i[4], 31);
  EXPECT_EQ(i[5], 0x3f800000);
  EXPECT_EQ(i[6], 2);  // round half to even
}

TEST_F(LaunchTest, KernelWithoutBarriersRunsWithoutFibers) {
  std::vector<float> x(4096, 1.0f), y(4096, 0.0f);
  const LaunchStats s =
      launch_kernel("scale_add", scale_add, dim3(16), dim3(256), 0, x.data(), y.data(), 1.0f, 4096);
  EXPECT_EQ(s.context_switches, 0u);
  EXPECT_EQ(s.fibers_created, 0u);
}

TEST_F(LaunchTest, FibersAreReusedAcrossLaunches) {
  configure([](Settings& s) { s.worker_threads = 1; });
  std::vector<float> x(512, 1.0f), sums(2);
  const LaunchStats first =
      launch_kernel("block_sum", block_sum, dim3(2), dim3(256), 0, x.data(), sums.data(), 512);
  const LaunchStats second =
      launch_kernel("block_sum", block_sum, dim3(2), dim3(256), 0, x.data(), sums.data(), 512);
  EXPECT_GT(second.context_switches, 0u);
  EXPECT_EQ(second.fibers_created, 0u);
  // Lazy scheduling: thread 0 runs on the OS thread's own stack, so 255 fibers suffice.
  EXPECT_LE(first.fibers_created, 255u);
}

TEST_F(LaunchTest, SameResultOnOneAndFourWorkerThreads) {
  const int n = 64 * 256;
  std::vector<float> x(n), one(64), four(64);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i % 17);
  configure([](Settings& s) { s.worker_threads = 1; });
  launch_kernel("block_sum", block_sum, dim3(64), dim3(256), 0, x.data(), one.data(), n);
  configure([](Settings& s) { s.worker_threads = 4; });
  launch_kernel("block_sum", block_sum, dim3(64), dim3(256), 0, x.data(), four.data(), n);
  EXPECT_EQ(one, four);
}

TEST_F(LaunchTest, InvalidConfigurationNamesKernel) {
  std::vector<float> x(1);
  for (dim3 block : {dim3(0), dim3(1025), dim3(32, 32, 2), dim3(1, 1, 65)}) {
    const std::string msg = emu_error_of([&] {
      launch_kernel("scale_add", scale_add, dim3(1), block, 0, x.data(), x.data(), 1.f, 1);
    });
    EXPECT_NE(msg.find("kernel 'scale_add': invalid launch configuration"), std::string::npos)
        << msg;
  }
  EXPECT_NE(emu_error_of([&] {
              launch_kernel("scale_add", scale_add, dim3(1, 65536), dim3(1), 0, x.data(), x.data(),
                            1.f, 1);
            }).find("invalid launch configuration"),
            std::string::npos);
}

TEST_F(LaunchTest, TrapNamesKernelThreadAndLineAndUnwindsWaitingThreads) {
  int destroyed = 0;
  const std::string msg = emu_error_of([&] {
    launch_kernel("trap_in_thread", trap_in_thread, dim3(1), dim3(64), 0, 37, &destroyed);
  });
  EXPECT_NE(msg.find("kernel 'trap_in_thread': thread (37,0,0) of block (0,0,0): __trap() at"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("basic.cu:"), std::string::npos) << msg;
  // Threads 0..36 were suspended at the barrier and unwound; 38..63 never started.
  EXPECT_EQ(destroyed, 38);
}

TEST_F(LaunchTest, ExceptionInThreadIsNested) {
  try {
    launch_kernel("throw_in_thread", throw_in_thread, dim3(2), dim3(32), 0, 5);
    FAIL() << "expected an exception";
  } catch (const EmuError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel 'throw_in_thread': thread (5,0,0)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("index 42 too large"), std::string::npos);
    EXPECT_THROW(std::rethrow_if_nested(e), std::out_of_range);
  }
}

// A GPU faults on a 16-byte access at an address that is not 16-byte aligned; x86 would not, so
// the vector helpers (kernels/cuda/vector_row.h) check it under the emulator.
TEST_F(LaunchTest, MisalignedVectorAccessIsAnErrorNamingKernelAndAddress) {
  alignas(16) float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  alignas(16) float y[12] = {};
  launch_kernel("copy_vectors", copy_vectors, dim3(1), dim3(2), 0, x, y, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], x[i]) << i;
  char address[32];
  std::snprintf(address, sizeof(address), "%p", static_cast<const void*>(x + 1));
  std::string msg = emu_error_of(
      [&] { launch_kernel("copy_vectors", copy_vectors, dim3(1), dim3(2), 0, x + 1, y, 8); });
  EXPECT_NE(msg.find("kernel 'copy_vectors'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::string("misaligned 16-byte vector load at address ") + address),
            std::string::npos)
      << msg;
  std::snprintf(address, sizeof(address), "%p", static_cast<const void*>(y + 2));
  msg = emu_error_of(
      [&] { launch_kernel("copy_vectors", copy_vectors, dim3(1), dim3(2), 0, x, y + 2, 8); });
  EXPECT_NE(msg.find(std::string("misaligned 16-byte vector store at address ") + address),
            std::string::npos)
      << msg;
}

TEST_F(LaunchTest, LaunchFromInsideKernelIsRefused) {
  float x = 0;
  const std::string msg = emu_error_of([&] {
    launch_kernel("launch_inside_kernel", launch_inside_kernel, dim3(1), dim3(1), 0, &x);
  });
  EXPECT_NE(msg.find("kernel 'launch_inside_kernel'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dynamic parallelism"), std::string::npos) << msg;
  EXPECT_EQ(x, 0.0f);
}

TEST_F(LaunchTest, IntrinsicOutsideKernelIsAnError) {
  const std::string msg = emu_error_of([] { detail::sync_block(0, detail::Site::here()); });
  EXPECT_NE(msg.find("__syncthreads() called outside a kernel launch at"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("test_launch.cpp:"), std::string::npos) << msg;
}

}  // namespace
}  // namespace glass::emu::testing
