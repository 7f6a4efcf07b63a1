// Device names: parsing, printing, and what a build without a GPU says when `cuda` is used.
// With CUDA built in (GLASS_HAS_CUDA) and no GPU present, the first use of `cuda` (an allocation,
// the kernel table) fails with one line naming the device and CUDA's reason; on a machine with a
// GPU those tests are skipped and the device tests of tests/kernels run on it instead.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/tensor.h"
#include "kernels/backend.h"
#include "tests/testing.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass {
namespace {

using testing::error_of;

TEST(Devices, ParseAndPrintCpu) {
  EXPECT_EQ(Device::parse("cpu"), kCPU);
  EXPECT_EQ(kCPU.str(), "cpu");
}

TEST(Devices, UnknownNamesAreRefusedByName) {
  EXPECT_NE(error_of([] { Device::parse("tpu"); }).find("unknown device 'tpu'"), std::string::npos);
  EXPECT_NE(error_of([] { Device::parse(""); }).find("unknown device ''"), std::string::npos);
}

#if defined(GLASS_HAS_CUDA)

TEST(Devices, ParseCudaAndIndex) {
  EXPECT_EQ(Device::parse("cuda"), kCUDA);
  EXPECT_EQ(Device::parse("cuda:0"), kCUDA);
  EXPECT_EQ(Device::parse("cuda:3"), (Device{DeviceKind::cuda, 3}));
  EXPECT_EQ(Device::parse("cuda:12").index, 12);
  EXPECT_EQ(kCUDA.str(), "cuda:0");
  EXPECT_EQ((Device{DeviceKind::cuda, 7}).str(), "cuda:7");
}

TEST(Devices, MalformedCudaNamesAreRefusedByName) {
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "cuda:1x", "cuda0", "cudax", "cuda: 1"}) {
    const std::string e = error_of([&] { Device::parse(bad); });
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("cuda:N"), std::string::npos) << bad << ": " << e;
  }
}

// An emulated GPU (-DGLASS_CUDA_RUNTIME=emu) does not count: auto is cpu there.
TEST(Devices, AutoIsCudaExactlyWhenAGpuIsPresent) {
#if defined(GLASS_CUDA_RUNTIME_EMU)
  EXPECT_EQ(Device::best_available(), kCPU);
#else
  EXPECT_EQ(Device::best_available(), cuda::device_count() > 0 ? kCUDA : kCPU);
#endif
}

// The line a user sees on a machine without a GPU, from each door into the device.
TEST(Devices, CudaWithoutGpuFailsWithOneClearLine) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  const std::string prefix = "device cuda:0: no CUDA GPU found (cudaGetDeviceCount: ";
  for (const std::string& e : {error_of([] { Tensor::empty({3}, DType::f32, kCUDA); }),
                               error_of([] { Allocator::for_device(kCUDA); }),
                               error_of([] { kernels::backend(kCUDA); })}) {
    EXPECT_EQ(e.rfind(prefix, 0), 0u) << e;
    EXPECT_EQ(e.back(), ')') << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  const std::string other =
      error_of([] { Tensor::empty({3}, DType::f32, Device::parse("cuda:2")); });
  EXPECT_EQ(other.rfind("device cuda:2: no CUDA GPU found", 0), 0u) << other;
}

TEST(Devices, CudaIndexBeyondTheGpusIsRefused) {
  const int n = cuda::device_count();
  if (n == 0) GTEST_SKIP() << "no GPU";
  const Device missing{DeviceKind::cuda, n};
  const std::string e = error_of([&] { Allocator::for_device(missing); });
  EXPECT_NE(e.find("there is no such GPU"), std::string::npos) << e;
}

#else

TEST(Devices, CudaIsNotInThisBuild) {
  const std::string e = error_of([] { Device::parse("cuda"); });
  EXPECT_NE(e.find("no CUDA runtime"), std::string::npos) << e;
  EXPECT_EQ(Device::best_available(), kCPU);
}

#endif

}  // namespace
}  // namespace glass
