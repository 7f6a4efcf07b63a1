// Which path a launch of kernels/cuda takes (kernels/cuda/kernel_launcher.h). The host compiler's
// build of kernels/cuda serves `emu` and, on the emulated CUDA runtime, `cuda` as well: one set of
// launchers in two kernel tables. So each launch must take its own device's path: emu's runs the
// grid on the emulator at once (stream 0, no native stream), cuda's goes through the CUDA runtime
// on the calling thread's current stream, as nvcc's build does on a GPU.
#include <gtest/gtest.h>

#include <string_view>

#include "autograd/ops.h"
#include "engine/stream.h"
#include "kernels/cuda/kernel_launcher.h"
#include "tests/testing.h"

namespace glass {
namespace {

// The launch of a + b on `device`, issued from a side stream's worker.
LaunchRecord add_on_a_side_stream(Device device, Stream& stream) {
  const Tensor a = Tensor::from_host(std::vector<float>(64, 1.0f).data(), {64}, DType::f32, device);
  Tensor sum;
  testing::LaunchLog log;
  stream.enqueue([&] { sum = add(a, a); });
  stream.synchronize();
  EXPECT_EQ(testing::values(sum), std::vector<double>(64, 2.0)) << device.str();
  for (const LaunchRecord& r : log.records)
    if (r.info.device == device && r.info.flops > 0) return r;
  ADD_FAILURE() << "no launch of the add on " << device.str();
  return {};
}

TEST(LaunchPath, EmuRunsTheGridAtOnceOnTheEmulator) {
  Stream side(kEmu);
  const LaunchRecord add = add_on_a_side_stream(kEmu, side);
  EXPECT_EQ(add.info.stream, 0);  // emu streams are always drained
  EXPECT_EQ(add.info.native_stream, nullptr);
}

TEST(LaunchPath, CudaGoesThroughTheRuntimeOnTheCurrentStream) {
  if (!testing::have_cuda()) GTEST_SKIP() << "no cuda device here";
  Stream side(kCUDA);
  const LaunchRecord add = add_on_a_side_stream(kCUDA, side);
  EXPECT_EQ(add.info.stream, side.id());
  EXPECT_EQ(add.info.native_stream, side.native());
  EXPECT_NE(add.info.native_stream, nullptr);
}

// A launcher that left LaunchInfo::device unset would run a cuda launch on the emulator at once,
// out of stream order; the launcher refuses to guess.
void do_nothing_kernel(int) {}

TEST(LaunchPath, ALaunchInfoWithoutAnEmuOrCudaDeviceIsRefused) {
  LaunchInfo info;
  info.kernel = "do_nothing";
  info.device = kCPU;
  EXPECT_TRUE(testing::contains_all(
      testing::error_of([&] { kernels::cuda::launch_cuda_kernel(info, do_nothing_kernel, 1); }),
      {"kernel 'do_nothing'", "names device cpu", "LaunchInfo::device"}));
}

}  // namespace
}  // namespace glass
