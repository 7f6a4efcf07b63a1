// A device's memory: GLASS_EMU_GPU_MEMORY's sizes, the emulated GPUs' budgets (the emu device's
// and the emulated CUDA runtime's cudaMalloc and cudaMemGetInfo), the free memory the pre-flight
// reads, and the out-of-memory error that names the tensor, op and figures. (With a budget set
// by the variable: tests/samples/test_preflight_cli.cpp, whose train_gpt processes set it.)
#include <gtest/gtest.h>

#include <string>

#include "engine/allocator.h"
#include "engine/device_memory.h"
#include "engine/emu/sanitizer.h"  // GLASS_EMU_ASAN (a header only: no emu needed)
#include "engine/launch.h"
#include "engine/out_of_memory.h"
#include "engine/tensor.h"
#include "tests/testing.h"

#if defined(GLASS_HAS_EMU)
#include "engine/emu/device_limits.h"
#include "engine/emu/gpu_memory.h"
#include "engine/emu/memory.h"
#endif
#if defined(GLASS_HAS_CUDA)
#include <cuda_runtime_api.h>

#include "engine/cuda/runtime.h"
#endif

namespace glass {
namespace {

using testing::contains_all;
using testing::error_of;

#if defined(GLASS_HAS_EMU)

TEST(EmuGpuMemory, ParsesByteCountsAndUnits) {
  using emu::parse_byte_size;
  EXPECT_EQ(parse_byte_size("1073741824"), size_t{1} << 30);
  EXPECT_EQ(parse_byte_size("1"), 1u);
  EXPECT_EQ(parse_byte_size("2GiB"), size_t{2} << 30);
  EXPECT_EQ(parse_byte_size("512MiB"), size_t{512} << 20);
  EXPECT_EQ(parse_byte_size("64KiB"), size_t{64} << 10);
  EXPECT_EQ(parse_byte_size("1TiB"), size_t{1} << 40);
  EXPECT_EQ(parse_byte_size("141GB"), size_t{141} * 1000 * 1000 * 1000);
  EXPECT_EQ(parse_byte_size("3 kB"), 3000u);
  EXPECT_EQ(parse_byte_size(" 80 gb "), size_t{80} * 1000 * 1000 * 1000);  // units: any case
  EXPECT_EQ(parse_byte_size("1.5GiB"), size_t{3} << 29);
  EXPECT_EQ(parse_byte_size("0.5MB"), 500000u);
  EXPECT_EQ(parse_byte_size("100B"), 100u);
}

TEST(EmuGpuMemory, RefusesWhatIsNotASize) {
  for (const char* bad : {"",
                          " ",
                          "GiB",
                          "-1",
                          "0",
                          "0GiB",
                          "1.5",
                          "1.5B",
                          "2 GiBs",
                          "2GiB5",
                          "1e9",
                          "10XB",
                          "1..5GB",
                          ".5GB",
                          "5.GB",
                          "0x100",
                          "1 2",
                          "0.1B",
                          "99999999999999999999",
                          "9999999999TB"})
    EXPECT_EQ(emu::parse_byte_size(bad), std::nullopt) << "'" << bad << "'";
}

// Without the variable (as this test binary runs), each memory is the H200's 141 GB, the figure
// cudaGetDeviceProperties reports too; allocations count in 256-byte units against their own
// memory only.
TEST(EmuGpuMemory, EachMemoryCountsItsOwnAllocations) {
  ASSERT_EQ(emu::gpu_memory_bytes(), emu::kH200.global_memory_bytes);
  const emu::GpuMemoryInfo device0 = emu::gpu_memory_info(emu::kEmuDeviceMemory);
  const emu::GpuMemoryInfo gpu5 = emu::gpu_memory_info(5);
  EXPECT_EQ(gpu5.total, emu::kH200.global_memory_bytes);
  void* p = emu::device_malloc(1000, 5);
  EXPECT_EQ(emu::gpu_memory_info(5).free, gpu5.free - 1024);  // 1000 rounded up to 256s
  EXPECT_EQ(emu::gpu_memory_info(emu::kEmuDeviceMemory).free, device0.free);
  emu::device_free(p);
  EXPECT_EQ(emu::gpu_memory_info(5).free, gpu5.free);
}

// Past the memory, device_malloc throws before asking the host for anything.
TEST(EmuGpuMemory, AllocationPastTheMemoryIsOutOfDeviceMemory) {
  const std::string e = error_of<emu::OutOfDeviceMemory>(
      [] { emu::device_malloc(emu::gpu_memory_bytes() + 1, emu::kEmuDeviceMemory); });
  EXPECT_TRUE(contains_all(e, {"out of memory", "GLASS_EMU_GPU_MEMORY"}));
}

// The emu device's free memory is the emu budget: a tensor takes its size-class bytes from it.
TEST(DeviceMemory, EmuReportsItsBudget) {
  Allocator::for_device(kEmu).empty_cache();
  const std::optional<DeviceMemory> before = device_memory(kEmu);
  ASSERT_TRUE(before);
  EXPECT_EQ(before->total_bytes, static_cast<int64_t>(emu::gpu_memory_bytes()));
  {
    const Tensor t = Tensor::empty({1 << 20}, DType::f32, kEmu);  // 4 MiB, a size class of its own
    EXPECT_EQ(device_memory(kEmu)->free_bytes, before->free_bytes - (4 << 20));
  }
  Allocator::for_device(kEmu).empty_cache();
  EXPECT_EQ(device_memory(kEmu)->free_bytes, before->free_bytes);
}

// An out-of-memory error on emu: the tensor's shape and dtype, the op and phase of the launch
// context, the allocator's figures, the device's, and the remedies.
TEST(OutOfMemory, EmuNamesTheTensorOpFiguresAndRemedies) {
  const int64_t rows = static_cast<int64_t>(emu::gpu_memory_bytes() / 4096) + 1;
  const Tensor small = Tensor::empty({3, 5}, DType::f32, kEmu);
  const std::string e = error_of<OutOfMemoryError>([&] {
    const LaunchScope scope("matmul", 7, Phase::backward);
    Tensor::empty({rows, 2048}, DType::bf16, kEmu);
  });
  EXPECT_TRUE(contains_all(
      e, {"out of memory on emu allocating ", fmt::format("for a tensor [{}, 2048] bf16", rows),
          "in op 'matmul' (backward)", "allocated", "reserved", "largest free block",
          "free of 131.3 GiB", "GLASS_EMU_GPU_MEMORY", "--batch", "--grad-accum", "--dtype bf16",
          "--recompute", "--zero 1", "--no-preflight"}));
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;  // one line
}

#endif  // GLASS_HAS_EMU

// On cpu too: aligned_alloc refuses a request larger than the machine (no overcommit that far).
TEST(OutOfMemory, CpuNamesTheTensorAndTheHostMemory) {
#if defined(GLASS_EMU_ASAN)
  GTEST_SKIP() << "AddressSanitizer's allocator aborts on a request this large";
#endif
  const std::string e = error_of<OutOfMemoryError>([] {
    const LaunchScope scope("gelu", 3, Phase::forward);
    Tensor::empty({int64_t{1} << 40, 1024}, DType::f32, kCPU);  // 4 PiB
  });
  EXPECT_TRUE(contains_all(
      e, {"out of memory on cpu allocating 4096.0 TiB", "for a tensor [1099511627776, 1024] f32",
          "in op 'gelu' (forward)", "MemAvailable", "--grad-accum"}));
}

TEST(DeviceMemory, CpuIsTheHostsAvailableMemory) {
  const std::optional<DeviceMemory> m = device_memory(kCPU);
  ASSERT_TRUE(m);  // Linux: /proc/meminfo
  EXPECT_GT(m->free_bytes, 0);
  EXPECT_LE(m->free_bytes, m->total_bytes);
  EXPECT_FALSE(device_memory(kMeta));  // a plan never runs out
}

TEST(DeviceMemory, FormatsBytesForPeople) {
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(512.0 * (1 << 20)), "512.0 MiB");
  EXPECT_EQ(format_bytes(double(size_t{3} << 30)), "3.00 GiB");
}

#if defined(GLASS_HAS_CUDA) && defined(GLASS_CUDA_RUNTIME_EMU)

// The emulated CUDA runtime: cudaMemGetInfo's total is cudaGetDeviceProperties' totalGlobalMem,
// cudaMalloc draws from the current GPU's memory, and past it fails as a GPU's does.
TEST(EmulatedCudaMemory, MallocAndMemGetInfoShareOneBudgetPerGpu) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no emulated GPU (GLASS_EMU_GPUS=0)";
  const cuda::DeviceGuard guard(0);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(total, prop.totalGlobalMem);
  EXPECT_EQ(total, emu::gpu_memory_bytes());
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free - (1 << 20));
  EXPECT_EQ(device_memory(Device{DeviceKind::cuda, 0})->free_bytes,
            static_cast<int64_t>(free_after));
  void* too_big = nullptr;
  EXPECT_EQ(cudaMalloc(&too_big, free_after + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);  // not sticky: cleared by the read
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_after, free);
}

#endif

}  // namespace
}  // namespace glass
