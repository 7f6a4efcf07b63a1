// Every launch of a GPT training step on emu, in f32 and in bf16 (FlashAttention, fused classifier,
// clipping, AdamW, the bf16 copies), is either a kernel of kernels/cuda that this build's ptxas
// report has a row for (so the occupancy table shows its registers and occupancy, never
// "(no ptxas row)"), or a cuBLAS call, marked as such. A launch whose name does not follow the
// convention of kernels/cuda (launch N runs N_kernel) fails here by name.
#include <gtest/gtest.h>

#include "engine/kernel_resources.h"
#include "engine/trace.h"
#include "tests/testing.h"
#include "tests/train/train_testing.h"

namespace glass {
namespace {

#if defined(GLASS_EXPECT_KERNEL_RESOURCES)

void expect_every_launch_has_a_ptxas_row(const std::string& dtype) {
  train::TrainOptions o = testing::tiny_options();
  o.device = "emu";
  o.dtype = dtype;
  o.steps = 2;
  train::Trainer trainer(o);
  TraceRecorder recorder;
  recorder.start();
  trainer.train_step();
  recorder.stop();
  const KernelResourceReport& report = kernel_resource_report();
  ASSERT_TRUE(report.missing.empty()) << report.missing;
  const std::vector<LaunchOccupancy> rows = launch_occupancy(recorder.launches(), report);
  ASSERT_GT(rows.size(), 10u);
  int library_calls = 0;
  for (const LaunchOccupancy& r : rows) {
    if (!r.library.empty()) {
      EXPECT_EQ(r.library, "cuBLAS") << r.kernel;
      ++library_calls;
      continue;
    }
    EXPECT_GT(r.instantiations, 0) << dtype << ": no ptxas row for the launch '" << r.kernel
                                   << "' (no function " << r.kernel << "_kernel in kernels/cuda)";
    EXPECT_GT(r.occupancy.fraction, 0) << r.kernel;
  }
  EXPECT_GT(library_calls, 0);  // the GEMMs
  const std::string table = occupancy_table(rows, report);
  EXPECT_EQ(table.find("(no ptxas row)"), std::string::npos) << table;
  EXPECT_NE(table.find("(cuBLAS)"), std::string::npos) << table;
}

TEST(StepOccupancy, EveryLaunchOfAnF32StepHasAPtxasRowOrIsCuBlas) {
  expect_every_launch_has_a_ptxas_row("f32");
}

TEST(StepOccupancy, EveryLaunchOfABf16StepHasAPtxasRowOrIsCuBlas) {
  expect_every_launch_has_a_ptxas_row("bf16");
}

#endif

}  // namespace
}  // namespace glass
