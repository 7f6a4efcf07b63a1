// The ptxas resource report and the occupancy arithmetic (engine/kernel_resources.h):
// - theoretical_occupancy on an H200 against cases worked by hand from the limits (64 warps, 32
//   blocks, 64K registers and 228 KiB shared memory per SM), one per limiting resource;
// - this build's kernel_resources.json (written by the build from ptxas --resource-usage, when nvcc
//   compiled kernels/cuda): every __global__ function of kernels/cuda/*.cu, found by reading the
//   sources here, has an sm_90 row, and no production kernel spills; the Tensor Core kernels
//   (named *_mma or *_mma_kernel) hold mma instructions and no local memory or stack on sm_90;
// (tests/cuda_kernels/test_kernel_occupancy.cpp: the kernel summary of a traced op on emu.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "engine/kernel_resources.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::contains_all;

TEST(Occupancy, WorkedCasesOnH200) {
  // 256 threads = 8 warps, 32 registers (1024 per warp: 64 warps' worth): 8 blocks fill the 64
  // warps of an SM.
  Occupancy o = theoretical_occupancy(256, 32, 0);
  EXPECT_EQ(o.warps_per_block, 8);
  EXPECT_EQ(o.blocks_per_sm, 8);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  EXPECT_STREQ(o.limiter, "warps");
  // 1024 threads at 64 registers: 2048 registers per warp, 32 warps' worth per SM: one block.
  o = theoretical_occupancy(1024, 64, 0);
  EXPECT_EQ(o.blocks_per_sm, 1);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_STREQ(o.limiter, "registers");
  // 33 registers round up to 40 per thread (1280 per warp): 51 warps' worth, 6 blocks of 8 warps.
  o = theoretical_occupancy(256, 33, 0);
  EXPECT_EQ(o.blocks_per_sm, 6);
  EXPECT_DOUBLE_EQ(o.fraction, 48.0 / 64);
  // 48 KiB of shared memory + 1 KiB reserved: 4 blocks in 228 KiB; 4 warps each.
  o = theoretical_occupancy(128, 16, 48 * 1024);
  EXPECT_EQ(o.blocks_per_sm, 4);
  EXPECT_DOUBLE_EQ(o.fraction, 16.0 / 64);
  EXPECT_STREQ(o.limiter, "shared memory");
  // One warp per block: the 32-block limit leaves half the warps empty.
  o = theoretical_occupancy(32, 16, 0);
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_STREQ(o.limiter, "blocks");
  // Blocks that cannot run at all: too many threads, more shared memory than a block may have.
  EXPECT_EQ(theoretical_occupancy(2048, 16, 0).blocks_per_sm, 0);
  EXPECT_EQ(theoretical_occupancy(128, 16, 300 * 1024).blocks_per_sm, 0);
}

TEST(KernelResources, MissingReportSaysWhy) {
  const KernelResourceReport r = read_kernel_resources("/nonexistent/kernel_resources.json");
  EXPECT_TRUE(r.kernels.empty());
  EXPECT_TRUE(contains_all(r.missing, {"no ptxas report", "/nonexistent/kernel_resources.json"}));
  const std::string table = occupancy_table({}, r);
  EXPECT_TRUE(contains_all(table, {"unknown", "no ptxas report"}));
}

#if defined(GLASS_EXPECT_KERNEL_RESOURCES)

// The __global__ functions defined in kernels/cuda/*.cu (the production kernels), read from the
// sources: a list independent of ptxas's.
std::set<std::string> global_functions_in_sources() {
  std::set<std::string> names;
  const std::string global = "__global__ void ";
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(GLASS_SOURCE_DIR) + "/kernels/cuda")) {
    if (entry.path().extension() != ".cu") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (size_t at = s.find(global); at != std::string::npos; at = s.find(global, at + 1)) {
      size_t begin = at + global.size();
      // `__global__ void __launch_bounds__(N, f<a, b>()) name(`: the name follows the bounds'
      // closing parenthesis, whose arguments may hold parentheses of their own
      const std::string bounds = "__launch_bounds__(";
      if (s.compare(begin, bounds.size(), bounds) == 0) {
        size_t close = begin + bounds.size();
        for (int depth = 1; close < s.size() && depth > 0; ++close)
          depth += s[close] == '(' ? 1 : s[close] == ')' ? -1 : 0;
        begin = s.find_first_not_of(" \n", close);
      }
      const size_t end = s.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", begin);
      names.insert(s.substr(begin, end - begin));
    }
  }
  return names;
}

TEST(KernelResources, EveryProductionKernelHasAnSm90RowAndNoneSpills) {
  const KernelResourceReport& report = kernel_resource_report();
  ASSERT_TRUE(report.missing.empty()) << report.missing;
  std::set<std::string> reported;
  for (const KernelResources& k : report.kernels) {
    if (k.arch != "sm_90" || !k.production) continue;
    reported.insert(k.function);
    EXPECT_FALSE(k.spills()) << k.function << "<" << k.template_args << "> (" << k.source
                             << ") spills " << k.spill_store_bytes << " bytes";
    EXPECT_GT(k.registers, 0) << k.function;
    EXPECT_LE(k.registers, emu::kH200.max_registers_per_thread) << k.function;
  }
  const std::set<std::string> defined = global_functions_in_sources();
  ASSERT_GT(defined.size(), 20u);
  for (const std::string& f : defined)
    EXPECT_TRUE(reported.count(f)) << "no sm_90 ptxas row for " << f;
  // The LayerNorm forward kernel: one instantiation per element type (f32, bf16).
  EXPECT_EQ(kernels_for_launch(report, "layernorm_forward").size(), 2u);
}

// The Tensor Core kernels (a function named *_mma or *_mma_kernel: the matmul ladder's rung 4, the
// mma FlashAttention kernels) hold mma instructions in their PTX and keep their fragments and
// accumulators in registers on sm_90: no local memory, no stack frame. The build's own check
// (ptxas_resources.py collect) refuses the same; this reads what the build wrote.
TEST(KernelResources, TensorCoreKernelsHaveMmaAndNoLocalMemory) {
  const KernelResourceReport& report = kernel_resource_report();
  ASSERT_TRUE(report.missing.empty()) << report.missing;
  const std::regex mma_kernel("_mma(_kernel)?$");
  for (const KernelResources& k : report.kernels) {
    if (k.arch != "sm_90" || !std::regex_search(k.function, mma_kernel)) continue;
    const std::string name = k.function + "<" + k.template_args + "> (" + k.source + ")";
    EXPECT_GT(k.mma_instructions, 0) << name;
    EXPECT_EQ(k.local_bytes, 0) << name;
    EXPECT_EQ(k.stack_bytes, 0) << name;
  }
  // The matmul rung: 4 layouts (A, B transposed or not) x 2 output types (f32, bf16), and the
  // swapped-rows test kernel; per 32-deep k step a warp does 2 x 4 x 4 mma.
  const std::vector<const KernelResources*> rung =
      kernels_for_launch(report, "matmul_tensor_core_mma");
  EXPECT_EQ(rung.size(), 9u);
  for (const KernelResources* k : rung) EXPECT_EQ(k->mma_instructions, 32) << k->template_args;
  // A kernel of the CUDA cores has none.
  for (const KernelResources* k : kernels_for_launch(report, "matmul_register_tiled"))
    EXPECT_EQ(k->mma_instructions, 0);
}

#endif

}  // namespace
}  // namespace glass
