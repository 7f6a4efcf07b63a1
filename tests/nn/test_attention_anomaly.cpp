// Anomaly mode (GLASS_CHECK_NAN) and attention with dropout (nn/layers.h): the causal mask sets
// the scores of future positions to -inf on purpose, so it must not stop the run; a non-finite
// value that the model makes is still reported at the op that made it.
#include <cmath>
#include <limits>

#include "nn/layers.h"
#include "tests/debug_switches.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

bool all_finite(const Tensor& t) {
  for (double v : values(t))
    if (!std::isfinite(v)) return false;
  return true;
}

// Before MaskValuesScope, the mask's cast (and the add of scores and mask) stopped this run with
// "produced -inf".
TEST(AttentionAnomaly, TheCausalMaskWithDropoutIsNotAnAnomaly) {
  DebugSwitches on({.check_nan = true});
  Generator gen(7), drop(8);
  Tensor q = rnd({2, 2, 5, 4}, gen, DType::f32).set_requires_grad(true);
  Tensor k = rnd({2, 2, 5, 4}, gen, DType::f32).set_requires_grad(true);
  Tensor v = rnd({2, 2, 5, 4}, gen, DType::f32).set_requires_grad(true);
  Tensor y;
  ASSERT_NO_THROW(y = causal_attention_dropout(q, k, v, 0.25, drop));
  ASSERT_NO_THROW(backward(sum(y)));
  EXPECT_TRUE(all_finite(y));
  for (const Tensor& t : {q, k, v}) EXPECT_TRUE(all_finite(t.grad()));
}

TEST(AttentionAnomaly, TheModuleTrainingWithDropoutRunsUnderAnomalyMode) {
  DebugSwitches on({.check_nan = true});
  Generator gen(9);
  CausalSelfAttention attn(8, 2, 0.1, gen);
  attn.c_attn.reset(gen, 0.2);
  attn.c_proj.reset(gen, 0.2);
  attn.train();
  Tensor x = rnd({2, 6, 8}, gen, DType::f32).set_requires_grad(true);
  ASSERT_NO_THROW(backward(sum(attn.forward(x))));
  EXPECT_TRUE(all_finite(x.grad()));
}

// The mask's exemption ends with the mask: an infinite score (q k^T overflowing f32, or a NaN where
// +inf and -inf meet) is still reported at the matmul that made it, not passed on.
TEST(AttentionAnomaly, AnInfiniteScoreIsStillReportedWhereItWasMade) {
  DebugSwitches on({.check_nan = true});
  Generator gen(10), drop(11);
  Tensor q = rnd({1, 1, 3, 2}, gen, DType::f32);
  Tensor k = rnd({1, 1, 3, 2}, gen, DType::f32);
  const Tensor v = rnd({1, 1, 3, 2}, gen, DType::f32);
  q = q * 1e30;
  k = k * 1e30;
  EXPECT_TRUE(
      contains_all(error_of([&] { causal_attention_dropout(q, k, v, 0.25, drop); }),
                   {"GLASS_CHECK_NAN: node #", " matmul (created at ", "in forward produced "}));
}

}  // namespace
}  // namespace glass
