// On emu, a training step of a tiny GPT runs its bias adds, GELU and their gradients inside the
// GEMMs (cuBLASLt epilogues): the trace of forward has no standalone gelu_forward and no bias
// launch, backward no gelu_backward, and the fused GEMMs are there instead. Before the fusion,
// forward launched gelu_forward and gemm_add_bias (one per linear), so this fails without it.
// f32 for now; bf16 steps get the same check once --dtype bf16 exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/testing.h"
#include "tests/train/train_testing.h"

namespace glass {
namespace {

int count(const std::vector<std::string>& names, const std::string& name) {
  return static_cast<int>(std::count(names.begin(), names.end(), name));
}

TEST(FusedEpilogues, TrainingStepOnEmuHasNoStandaloneGeluOrBiasLaunches) {
  train::TrainOptions o = testing::tiny_options();
  o.device = "emu";
  o.steps = 1;
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
  EXPECT_EQ(count(forward, "cublasLtMatmul_gelu_aux_bias"), layers);
  EXPECT_EQ(count(forward, "cublasLtMatmul_bias"), 3 * layers);  // c_attn, attn c_proj, mlp c_proj
  EXPECT_EQ(count(backward, "cublasLtMatmul_dgelu_bgrad"), layers);
  EXPECT_EQ(count(backward, "cublasLtMatmul_bgradb"), 3 * layers);
}

}  // namespace
}  // namespace glass
