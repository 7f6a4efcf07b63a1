// Choosing rungs: parsing GLASS_KERNEL_VARIANT (indices and names, ops left at production, errors
// naming the variable and listing the valid rungs), a training step on emu that runs the chosen
// rungs (seen by a LaunchObserver) and still matches the same step on cpu, and Llama's rms_norm
// reaching the chosen RMSNorm rung through the emu kernel table.
#include <cstdlib>

#include "tests/ladder/ladder_test.h"
#include "tests/train/train_testing.h"

namespace glass {
namespace {

using kernels::ladder::default_selection;
using kernels::ladder::parse_selection;
using kernels::ladder::Selection;
using testing::contains_all;
using testing::error_of;

constexpr const char* kSource = "GLASS_KERNEL_VARIANT";

TEST(LadderSelection, ProductionByDefault) {
  EXPECT_EQ(default_selection(), (Selection{{2, 2, 3, 3, 1}}));
  EXPECT_EQ(parse_selection("", kSource), default_selection());
  for (kernels::ladder::Op op : kernels::ladder::kOps)
    EXPECT_TRUE(kernels::ladder::rung(op, kernels::ladder::production_rung(op)).production);
}

TEST(LadderSelection, ParsesIndicesAndNames) {
  EXPECT_EQ(parse_selection("softmax:1,layernorm:float4,matmul:0", kSource),
            (Selection{{1, 3, 0, 3, 1}}));
  EXPECT_EQ(parse_selection("matmul:register", kSource), (Selection{{2, 2, 2, 3, 1}}));
  EXPECT_EQ(parse_selection("rmsnorm:naive", kSource), (Selection{{2, 2, 3, 3, 0}}));
  EXPECT_EQ(parse_selection("rmsnorm:1,layernorm:0", kSource), (Selection{{2, 0, 3, 3, 1}}));
  EXPECT_EQ(kernels::ladder::selection_string(Selection{{1, 3, 0, 3, 0}}),
            "softmax:1,layernorm:3,matmul:0,attention:3,rmsnorm:0");
}

TEST(LadderSelection, BadValuesNameTheVariableAndTheRungs) {
  EXPECT_TRUE(contains_all(error_of([] { parse_selection("softmax:7", kSource); }),
                           {"GLASS_KERNEL_VARIANT", "softmax has no rung '7'",
                            "0 naive, 1 coalesced, 2 shuffle (production), 3 float4"}));
  EXPECT_TRUE(contains_all(error_of([] { parse_selection("matmul:fast", kSource); }),
                           {"matmul has no rung 'fast'", "3 cublas (production)"}));
  EXPECT_TRUE(contains_all(error_of([] { parse_selection("softmx:1", kSource); }),
                           {"unknown op 'softmx'", "softmax, layernorm, matmul", "rmsnorm"}));
  EXPECT_TRUE(contains_all(error_of([] { parse_selection("rmsnorm:float4", kSource); }),
                           {"rmsnorm has no rung 'float4'", "0 naive, 1 vector (production)"}));
  EXPECT_TRUE(contains_all(error_of([] { parse_selection("softmax:1,layernorm", kSource); }),
                           {"'layernorm' is not op:rung"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             kernels::ladder::set_active_selection({{0, 4, 0, 3, 1}});
                           }),
                           {"layernorm has no rung 4"}));
}

TEST(LadderSelection, ReadsTheEnvironment) {
  ::setenv(kSource, "layernorm:1", 1);
  EXPECT_EQ(kernels::ladder::selection_from_env(), (Selection{{2, 1, 3, 3, 1}}));
  ::setenv(kSource, "rmsnorm:naive", 1);
  EXPECT_EQ(kernels::ladder::selection_from_env(), (Selection{{2, 2, 3, 3, 0}}));
  ::setenv(kSource, "softmax:-1", 1);
  EXPECT_TRUE(contains_all(error_of([] { kernels::ladder::selection_from_env(); }),
                           {"GLASS_KERNEL_VARIANT=softmax:-1", "softmax has no rung '-1'"}));
  ::unsetenv(kSource);
  EXPECT_EQ(kernels::ladder::selection_from_env(), default_selection());
}

struct StepResult {
  double loss, grad_norm;
  std::vector<std::string> kernels;
};

// One training step of the tiny GPT (dropout on, so attention runs softmax) on `device`.
StepResult train_step(const std::string& device) {
  train::TrainOptions o = testing::tiny_options();
  o.device = device;
  o.steps = 1;
  train::Trainer trainer(o);
  testing::LaunchLog log;
  const train::StepResult r = trainer.train_step();
  return {r.loss, r.grad_norm, log.kernels()};
}

// The production kernels and, per selection, the kernels that must replace them.
const char* const kProduction[] = {"softmax_forward", "layernorm_forward",
                                   "cublasSgemmStridedBatched"};

TEST(LadderSelection, TrainingStepRunsTheChosenRungsAndMatchesCpu) {
  const StepResult cpu = train_step("cpu");
  const StepResult production = train_step("emu");
  for (const char* kernel : kProduction)
    EXPECT_GT(testing::count_of(production.kernels, kernel), 0) << kernel;

  const Selection selections[] = {{{0, 0, 0, 3, 1}}, {{1, 1, 1, 3, 1}}, {{3, 3, 2, 3, 1}}};
  for (const Selection& s : selections) {
    SCOPED_TRACE(kernels::ladder::selection_string(s));
    const testing::ScopedSelection selected(s);
    const StepResult emu = train_step("emu");
    for (size_t i = 0; i < std::size(kProduction); ++i) {  // attention: test_attention_rungs
      const char* chosen = kernels::ladder::rung(kernels::ladder::kOps[i], s.rung[i]).kernel;
      // every production launch of the op became a launch of the chosen rung (the production
      // gemm sends a GEMM with a bias to cuBLASLt: cublasLtMatmul_bias launches are gemm's too;
      // the fused epilogues of gemm_epilogue are not the ladder's and stay)
      const int production_launches =
          testing::count_of(production.kernels, kProduction[i]) +
          (kernels::ladder::kOps[i] == kernels::ladder::Op::matmul
               ? testing::count_of(production.kernels, "cublasLtMatmul_bias") -
                     testing::count_of(emu.kernels, "cublasLtMatmul_bias")
               : 0);
      EXPECT_EQ(testing::count_of(emu.kernels, kProduction[i]), 0) << kProduction[i];
      EXPECT_EQ(testing::count_of(emu.kernels, chosen), production_launches) << chosen;
    }
    EXPECT_NEAR(emu.loss, cpu.loss, 1e-4 * cpu.loss);
    EXPECT_NEAR(emu.grad_norm, cpu.grad_norm, 1e-3 * cpu.grad_norm);
  }
}

// matmul:tensor_core in f32 training: every GEMM the production table sends to cuBLAS runs on the
// Tensor Core rung, after rounding its operands to bf16 (two launches each), so the step
// matches cpu only to bf16 precision.
TEST(LadderSelection, TrainingStepOnTheTensorCoreRung) {
  const StepResult cpu = train_step("cpu");
  const StepResult production = train_step("emu");
  const int gemms = testing::count_of(production.kernels, "cublasSgemmStridedBatched");
  ASSERT_GT(gemms, 0);
  const testing::ScopedSelection selected(
      kernels::ladder::parse_selection("matmul:tensor_core", "test"));
  const StepResult emu = train_step("emu");
  // (a GEMM with a bias is cuBLASLt's in production and the rung's under a selection)
  const int bias_gemms = testing::count_of(production.kernels, "cublasLtMatmul_bias") -
                         testing::count_of(emu.kernels, "cublasLtMatmul_bias");
  EXPECT_EQ(testing::count_of(emu.kernels, "cublasSgemmStridedBatched"), 0);
  EXPECT_EQ(testing::count_of(emu.kernels, "matmul_tensor_core_mma"), gemms + bias_gemms);
  EXPECT_LE(testing::count_of(emu.kernels, "matmul_tensor_core_round_bf16"),
            2 * (gemms + bias_gemms));
  EXPECT_NEAR(emu.loss, cpu.loss, 1e-2 * cpu.loss);
  EXPECT_NEAR(emu.grad_norm, cpu.grad_norm, 5e-2 * cpu.grad_norm);
}

// Llama's rms_norm on emu, in f32 and bf16: with rmsnorm:naive selected its forward launches the
// naive rung instead of the production kernel (backward kernels are not the ladder's), and the
// output still matches cpu; with the production selection, the production kernel.
TEST(LadderSelection, RmsNormReachesTheChosenRung) {
  Generator gen(9);
  const Tensor x_host = cast(cast(randn({5, 37}, gen, 0.5, 2), DType::bf16), DType::f32);
  const Tensor w_host = cast(cast(randn({37}, gen, 1, 0.5), DType::bf16), DType::f32);
  const Tensor y_cpu = rms_norm(x_host, w_host);
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (const char* chosen : {"rmsnorm:naive", "rmsnorm:vector"}) {
      SCOPED_TRACE(fmt::format("{} {}", chosen, dtype_name(dtype)));
      const testing::ScopedSelection selected(parse_selection(chosen, "test"));
      const Tensor x = testing::on_device(cast(x_host, dtype)),
                   w = testing::on_device(cast(w_host, dtype));
      testing::LaunchLog log;
      const Tensor y = rms_norm(x, w);
      const std::vector<std::string> forward = log.kernels();
      const bool naive = std::string_view(chosen) == "rmsnorm:naive";
      EXPECT_EQ(forward,
                std::vector<std::string>{naive ? "rmsnorm_forward_naive" : "rmsnorm_forward"});
      EXPECT_TRUE(testing::all_close(testing::to_cpu(cast(y, DType::f32)), y_cpu,
                                     dtype == DType::bf16 ? 1.0 / 256 : 1e-5));
    }
  }
}

}  // namespace
}  // namespace glass
