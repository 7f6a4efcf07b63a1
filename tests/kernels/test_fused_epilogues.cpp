// On emu, a training step of a tiny GPT runs its bias adds, GELU and their gradients inside the
// GEMMs (cuBLASLt epilogues): the trace of forward has no standalone gelu_forward and no bias
// launch, backward no gelu_backward, and the fused GEMMs are there instead. Before the fusion,
// forward launched gelu_forward and gemm_add_bias (one per linear), so this fails without it.
// The same in bf16 (--dtype bf16), whose step also shows the rest of the fast path: attention is
// the flash kernels (no naive attention, no copies of q, k, v into heads), and the loss is the
// fused classifier (no cross_entropy). Before flash and the classifier had bf16 forms, a bf16
// step launched attention_forward/_backward and cross_entropy_forward/backward instead. Last,
// cpu's bf16 step, which fuses the MLP's GELU into its GEMM.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/testing.h"
#include "tests/train/train_testing.h"

namespace glass {
namespace {

// One step's forward and backward launches on emu, in `dtype`, default attention (auto), no
// dropout.
void expect_fused_epilogues_step(const std::string& dtype) {
  train::TrainOptions o = testing::tiny_options();
  o.device = "emu";
  o.dtype = dtype;
  o.steps = 1;
  o.dropout = 0;  // with dropout, attention is built from plain ops
  o.n_embd = 32;  // head dim 16: what flash takes
  train::Trainer trainer(o);
  testing::LaunchLog log;
  trainer.train_step();
  const std::vector<std::string> forward = log.kernels(Phase::forward),
                                 backward = log.kernels(Phase::backward);
  ASSERT_FALSE(forward.empty());
  ASSERT_FALSE(backward.empty());
  for (const std::string& k : forward) {
    EXPECT_NE(k, "gelu_forward") << "a standalone GELU in forward";
    EXPECT_EQ(k.find("add_bias"), std::string::npos) << "a standalone bias add: " << k;
  }
  for (const std::string& k : backward) EXPECT_NE(k, "gelu_backward") << "a standalone dGELU";
  // Per layer: the MLP's first GEMM carries bias + GELU (aux kept), its second and every other
  // linear's carry the bias; backward's dGELU GEMM also sums db_fc, and each dW GEMM of a linear
  // with a bias sums its db.
  const int layers = static_cast<int>(o.n_layer);
  EXPECT_EQ(testing::count_of(forward, "cublasLtMatmul_gelu_aux_bias"), layers);
  EXPECT_EQ(testing::count_of(forward, "cublasLtMatmul_bias"),
            3 * layers);  // c_attn, attn c_proj, mlp c_proj
  EXPECT_EQ(testing::count_of(backward, "cublasLtMatmul_dgelu_bgrad"), layers);
  EXPECT_EQ(testing::count_of(backward, "cublasLtMatmul_bgradb"), 3 * layers);
  // Attention: flash forward and backward once per layer, reading qkv where c_attn wrote it, so
  // no naive attention kernels.
  // The loss: the fused classifier, once.
  EXPECT_EQ(testing::count_of(forward, "flash_attention_forward"), layers);
  EXPECT_EQ(testing::count_of(backward, "flash_attention_backward_query"), layers);
  EXPECT_EQ(testing::count_of(backward, "flash_attention_backward_key"), layers);
  EXPECT_EQ(testing::count_of(forward, "fused_classifier"), 1);
  for (const auto* phase : {&forward, &backward})
    for (const std::string& k : *phase) {
      EXPECT_EQ(k.rfind("attention_", 0), std::string::npos) << "naive attention: " << k;
      EXPECT_EQ(k.find("cross_entropy"), std::string::npos) << "unfused loss: " << k;
    }
}

TEST(FusedEpilogues, TrainingStepOnEmuHasNoStandaloneGeluOrBiasLaunches) {
  expect_fused_epilogues_step("f32");
}

// Issue 12's trace check for a bf16 step.
TEST(FusedEpilogues, Bf16TrainingStepOnEmuHasNoStandaloneGeluOrBiasLaunches) {
  expect_fused_epilogues_step("bf16");
}

// cpu's bf16 step fuses two of the MLP's passes (kernels/cpu/gemm_bf16.cpp): the first GEMM
// applies GELU in its tiles (`gemm_gelu_aux`: no f32 pre, no gelu_forward), and backward's dGELU
// with db_fc is one pass over the GEMM's f32 result (`gelu_backward_column_sums`), not
// gelu_backward, sum_dim and a rounding pass. Before the GELU fusion, forward launched
// gelu_forward once per layer.
TEST(FusedEpilogues, Bf16TrainingStepOnCpuAppliesGeluInTheMlpGemm) {
  train::TrainOptions o = testing::tiny_options();
  o.device = "cpu";
  o.dtype = "bf16";
  o.steps = 1;
  o.dropout = 0;
  train::Trainer trainer(o);
  testing::LaunchLog log;
  trainer.train_step();
  const std::vector<std::string> forward = log.kernels(Phase::forward),
                                 backward = log.kernels(Phase::backward);
  const int layers = static_cast<int>(o.n_layer);
  EXPECT_EQ(testing::count_of(forward, "gemm_gelu_aux"), layers);
  EXPECT_EQ(testing::count_of(backward, "gelu_backward_column_sums"), layers);
  for (const std::string& k : forward) {
    EXPECT_NE(k, "gelu_forward") << "a standalone GELU in forward";
    EXPECT_NE(k, "gemm_epilogue_to_bf16") << "a rounding pass in forward";
  }
  for (const std::string& k : backward) {
    EXPECT_NE(k, "gelu_backward") << "a standalone dGELU";
    EXPECT_NE(k, "gemm_epilogue_to_bf16") << "a rounding pass in backward";
  }
}

}  // namespace
}  // namespace glass
