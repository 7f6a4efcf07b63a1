// CUDA errors as glass::Error (engine/cuda/check.h): the message names what was being done, the
// call, and CUDA's name and text for the error; a failed kernel launch names the kernel, its
// configuration and the autograd op and node it ran for. Needs the CUDA runtime library, not a
// GPU: the errors are fed in by hand.
#if defined(GLASS_HAS_CUDA)
#include <gtest/gtest.h>

#include <string>

#include "engine/cuda/check.h"
#include "engine/error.h"

namespace glass {
namespace {

TEST(CudaErrors, SuccessIsSilent) {
  EXPECT_NO_THROW(cuda::check(cudaSuccess, "cudaMalloc(&p, n)", "Allocator on cuda:0"));
  EXPECT_NO_THROW(cuda::check_launch(cudaSuccess, LaunchInfo{}, nullptr));
}

TEST(CudaErrors, RuntimeCallFailureNamesWhatCallAndError) {
  try {
    GLASS_CUDA_CHECK(cudaErrorMemoryAllocation, "Allocator on cuda:0");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "Allocator on cuda:0: cudaErrorMemoryAllocation failed: cudaErrorMemoryAllocation "
              "(out of memory)");
  }
}

TEST(CudaErrors, LaunchFailureNamesKernelConfigurationOpAndNode) {
  LaunchInfo info;
  info.kernel = "layernorm_forward";
  info.device = kCUDA;
  info.grid = {37, 1, 1};
  info.block = {2048, 1, 1};
  info.shared_bytes = 128;
  const LaunchScope scope("layernorm", 42, Phase::forward);
  try {
    cuda::check_launch(cudaErrorInvalidConfiguration, info, nullptr);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "CUDA launch of kernel 'layernorm_forward' (op 'layernorm', node 42, grid [37, 1, "
              "1], block [2048, 1, 1], 128 B shared) on cuda:0 failed: "
              "cudaErrorInvalidConfiguration (invalid configuration argument)");
  }
}

}  // namespace
}  // namespace glass
#endif
