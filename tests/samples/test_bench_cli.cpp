// The benchmark programs' command lines (built with -DGLASS_BUILD_BENCH=ON; skipped without them):
// --help is a usage and exit 0, and bench_ladder runs every ladder it lists, attention included.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_testing.h"

namespace {

using glass::testing::Outcome;

// Runs build/bench/<program>, or skips the test when the build has no benchmarks.
Outcome run_bench(const std::string& program, const std::string& args) {
  const std::string exe = std::string(GLASS_BINARY_DIR) + "/bench/" + program;
  if (!std::filesystem::exists(exe)) return {-2, exe + " not built"};
  return glass::testing::run_command(exe + " " + args);
}

#define RUN_BENCH(r, program, args)           \
  const Outcome r = run_bench(program, args); \
  if (r.status == -2) GTEST_SKIP() << r.out;

TEST(BenchCli, HelpIsAUsageAndExitsZero) {
  for (const std::string program :
       {"op_overhead", "devices/bench_devices", "ladder/bench_ladder"}) {
    SCOPED_TRACE(program);
    RUN_BENCH(r, program, "--help");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("--repeats"), std::string::npos) << r.out;
  }
}

TEST(BenchCli, LadderRunsAttentionWithItsShapeFlag) {
  RUN_BENCH(r, "ladder/bench_ladder", "--op attention --bhtd 1 1 8 16 --warmup 0 --repeats 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("attention [1, 1, 8, 16] on emu"), std::string::npos) << r.out;
  const Outcome help = run_bench("ladder/bench_ladder", "--help");
  for (const char* text : {"attention", "--bhtd", "[1,4,128,64]"})
    EXPECT_NE(help.out.find(text), std::string::npos) << text << " in:\n" << help.out;
  const Outcome bad = run_bench("ladder/bench_ladder", "--op attention --bhtd 1 1 8");
  EXPECT_NE(bad.status, 0) << bad.out;
}

TEST(BenchCli, LadderRunsTheRmsNormPair) {
  RUN_BENCH(r, "ladder/bench_ladder", "--op rmsnorm --rows 5 --cols 33 --warmup 0 --repeats 1");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* text : {"rmsnorm [5, 33] on emu", "rmsnorm_forward_naive", "rmsnorm_forward "})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " in:\n" << r.out;
}

}  // namespace
