// The kernel summary of a traced LayerNorm on emu shows each launch configuration's theoretical
// occupancy on an H200, from this build's ptxas report (engine/kernel_resources.h; the report and
// the arithmetic are tested in tests/engine/test_kernel_resources.cpp).
#include <gtest/gtest.h>

#include "autograd/ops.h"
#include "engine/kernel_resources.h"
#include "engine/kernel_summary.h"
#include "engine/trace.h"
#include "kernels/peaks.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::contains_all;

#if defined(GLASS_EXPECT_KERNEL_RESOURCES)

TEST(KernelResources, KernelSummaryShowsEachLaunchConfigurationsOccupancy) {
  Generator gen(3);
  const Tensor x = to_device(randn({37, 1000}, gen), kEmu);
  const Tensor w = to_device(randn({1000}, gen), kEmu), b = to_device(randn({1000}, gen), kEmu);
  TraceRecorder recorder;
  recorder.start();
  layer_norm(x, w, b);
  recorder.stop();
  const KernelSummary s = summarize_kernels(recorder.launches(), kernels::peaks_for(kEmu));
  ASSERT_EQ(s.occupancy.size(), 1u);
  const LaunchOccupancy& o = s.occupancy[0];
  EXPECT_EQ(o.kernel, "layernorm_forward");
  EXPECT_EQ(o.threads, 512);  // whole warps for C = 1000, at most 512
  ASSERT_EQ(o.instantiations, 2);
  // The occupancy is the worked arithmetic above, applied to ptxas's numbers.
  const Occupancy expected = theoretical_occupancy(512, o.registers, o.static_shared_bytes);
  EXPECT_EQ(o.occupancy.blocks_per_sm, expected.blocks_per_sm);
  EXPECT_GT(o.occupancy.fraction, 0);
  EXPECT_TRUE(contains_all(
      s.table(), {"theoretical occupancy on an H200", "layernorm_forward", "limited by"}));
}

#endif

}  // namespace
}  // namespace glass
