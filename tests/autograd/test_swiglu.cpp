// swiglu: forward against naive loops in double; forward and gradients against the same function
// written with plain ops (silu(g) = g sigmoid(g), sigmoid(g) = softmax([g, 0])[0]) in f64 and f32;
// gradcheck in f64 (non-contiguous input); large |gate| (sigmoid saturating); the errors.
#include <cmath>
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// silu(gate) * up with plain ops: sigmoid(g) is the first entry of softmax([g, 0]).
Tensor swiglu_by_plain_ops(const Tensor& gate_up) {
  const int64_t F = gate_up.size(-1) / 2;
  const Tensor gate = slice(gate_up, -1, 0, F), up = slice(gate_up, -1, F, 2 * F);
  Shape pair = gate.shape();
  pair.push_back(1);
  const Tensor g1 = reshape(gate, pair);
  const Tensor sig = slice(softmax(concat({g1, zeros_like(g1)}, -1)), -1, 0, 1);
  return gate * reshape(sig, gate.shape()) * up;
}

TEST(Swiglu, ForwardF32MatchesNaive) {
  Generator gen(51);
  const Tensor gate_up = randn({3, 5, 2 * 11}, gen, 0, 3);  // |gate| up to ~10
  const std::vector<double> v = values(gate_up);
  std::vector<double> ref;
  for (size_t r = 0; r < 15; ++r)
    for (size_t j = 0; j < 11; ++j) {
      const double g = v[r * 22 + j], up = v[r * 22 + 11 + j];
      ref.push_back(g / (1 + std::exp(-g)) * up);
    }
  EXPECT_TRUE(all_close(swiglu(gate_up), from_vector(ref, {3, 5, 11}), 1e-5));
}

TEST(Swiglu, MatchesPlainOps) {
  Generator gen(52);
  for (DType dtype : {DType::f64, DType::f32}) {
    const Tensor gate_up = randn({37, 2 * 33}, gen, 0, 4, dtype);
    const Tensor dout = randn({37, 33}, gen, 0, 1, dtype);
    const GradcheckFn fused = [](const std::vector<Tensor>& in) { return swiglu(in[0]); };
    const GradcheckFn plain = [](const std::vector<Tensor>& in) {
      return swiglu_by_plain_ops(in[0]);
    };
    const std::vector<Tensor> got = output_and_grads(fused, {gate_up}, dout);
    const std::vector<Tensor> want = output_and_grads(plain, {gate_up}, dout);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(all_close(got[i], want[i], dtype == DType::f64 ? 1e-12 : 1e-5))
          << dtype_name(dtype) << " output/gradient " << i;
  }
}

TEST(Swiglu, Gradcheck) {
  Generator gen(53);
  const GradcheckFn f = [](const std::vector<Tensor>& in) { return swiglu(in[0]); };
  EXPECT_TRUE(gradcheck_passes(f, {rnd({3, 4, 10}, gen)}));
  EXPECT_TRUE(gradcheck_passes(f, {transpose(rnd({6, 5}, gen), 0, 1)}));  // non-contiguous
}

TEST(Swiglu, SaturatedGateStaysFinite) {
  const Tensor gate_up = from_vector<float>({-200, -30, 30, 200, 1, 2, 3, 4}, {1, 8});
  const std::vector<double> y = values(swiglu(gate_up));
  EXPECT_NEAR(y[0], 0, 1e-30);
  EXPECT_NEAR(y[1], -30 / (1 + std::exp(30.0)) * 2, 1e-15);
  EXPECT_NEAR(y[2], 30 * 3, 1e-4);
  EXPECT_NEAR(y[3], 200 * 4, 1e-3);
}

TEST(Swiglu, RejectsAnOddLastDimension) {
  EXPECT_TRUE(contains_all(error_of([] { swiglu(zeros({4, 7})); }), {"swiglu", "f32[4, 7]", "2F"}));
  EXPECT_TRUE(contains_all(error_of([] { swiglu(zeros({4, 0})); }), {"swiglu", "f32[4, 0]"}));
}

}  // namespace
}  // namespace glass
