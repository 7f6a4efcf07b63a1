// rms_norm: forward and gradients against the same function written with plain ops
// (x * pow(mean(x^2) + eps, -0.5) * w) and against naive loops in double, over several fixed row
// chunks; gradcheck in f64 (odd sizes, non-contiguous x); bit-identical results for any thread
// count; the errors for mismatched parameters.
// residual_rms_norm (the residual add fused with it, one node with two outputs): gradcheck in f64
// with both outputs used and with either one alone, f32 against the unfused add + rms_norm, one
// node with one launch each way, bit-identical for any thread count, and its errors.
#include <cmath>
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// RMSNorm written with plain ops: the independent reference.
Tensor rms_norm_by_plain_ops(const Tensor& x, const Tensor& w, double eps) {
  return x * pow(mean(x * x, {-1}, true) + eps, -0.5) * w;
}

TEST(RmsNorm, ForwardF32MatchesNaive) {
  Generator gen(31);
  const Tensor x = randn({3, 5, 13}, gen, 2, 3), w = randn({13}, gen);
  const std::vector<double> xv = values(x), wv = values(w);
  std::vector<double> ref(xv.size());
  for (size_t r = 0; r < xv.size() / 13; ++r) {
    double ms = 0;
    for (size_t j = 0; j < 13; ++j) ms += xv[r * 13 + j] * xv[r * 13 + j] / 13;
    for (size_t j = 0; j < 13; ++j) ref[r * 13 + j] = xv[r * 13 + j] / std::sqrt(ms + 1e-5) * wv[j];
  }
  EXPECT_TRUE(all_close(rms_norm(x, w), from_vector(ref, {3, 5, 13}), 1e-5));
}

TEST(RmsNorm, Gradcheck) {
  Generator gen(32);
  auto f = [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1], 1e-5); };
  const Tensor w = randn({7}, gen, 1, 0.5, DType::f64);
  const Tensor x = rnd({5, 7}, gen);
  const Tensor xt = transpose(rnd({7, 5}, gen), 0, 1);  // non-contiguous
  for (const Tensor& input : {x, xt})
    EXPECT_TRUE(gradcheck_passes(f, {input, w})) << input.describe();
}

TEST(RmsNorm, MatchesPlainOpsOverSeveralChunks) {
  Generator gen(33);
  // 70 rows: two full chunks of 32 and a tail; f64 (to 1e-12) and f32 (to 1e-5)
  for (DType dtype : {DType::f64, DType::f32}) {
    const Tensor x = randn({70, 13}, gen, 1, 2, dtype), w = randn({13}, gen, 0, 1, dtype);
    const Tensor dy = randn({70, 13}, gen, 0, 1, dtype);
    const GradcheckFn fused = [](const std::vector<Tensor>& in) {
      return rms_norm(in[0], in[1], 1e-5);
    };
    const GradcheckFn plain = [](const std::vector<Tensor>& in) {
      return rms_norm_by_plain_ops(in[0], in[1], 1e-5);
    };
    const std::vector<Tensor> got = output_and_grads(fused, {x, w}, dy);
    const std::vector<Tensor> want = output_and_grads(plain, {x, w}, dy);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(all_close(got[i], want[i], dtype == DType::f64 ? 1e-12 : 1e-5))
          << dtype_name(dtype) << " output/gradient " << i;
  }
}

TEST(RmsNorm, BitIdenticalForAnyThreadCount) {
  Generator gen(34);
  const Tensor x = randn({300, 129}, gen), dy = randn({300, 129}, gen), w = randn({129}, gen);
  const GradcheckFn f = [](const std::vector<Tensor>& in) { return rms_norm(in[0], in[1]); };
  auto run = [&] { return f32_values(output_and_grads(f, {x, w}, dy)); };
  EXPECT_EQ(with_threads(1, run), with_threads(2, run));
}

TEST(RmsNorm, RejectsMismatchedParameters) {
  const Tensor x = zeros({4, 6});
  EXPECT_TRUE(contains_all(error_of([&] { rms_norm(x, ones({5})); }), {"rms_norm", "f32[5]"}));
  EXPECT_TRUE(contains_all(error_of([&] { rms_norm(x, ones({6}, DType::f64)); }),
                           {"rms_norm", "f64[6]", "f32[4, 6]"}));
}

// Both outputs of residual_rms_norm side by side, so that gradcheck's random projection weighs
// the gradient arriving at each one independently.
Tensor residual_and_rms_normed(const std::vector<Tensor>& in) {
  const ResidualNorm r = residual_rms_norm(in[0], in[1], in[2], 1e-5);
  return concat({r.residual, r.normed}, -1);
}

TEST(ResidualRmsNorm, Gradcheck) {
  Generator gen(41);
  const Tensor w = randn({7}, gen, 1, 0.5, DType::f64);
  const Tensor x = rnd({3, 5, 7}, gen), delta = rnd({3, 5, 7}, gen);
  EXPECT_TRUE(gradcheck_passes(residual_and_rms_normed, {x, delta, w}));
  const Tensor xt = transpose(rnd({7, 5}, gen), 0, 1), dt = transpose(rnd({7, 5}, gen), 0, 1);
  EXPECT_TRUE(gradcheck_passes(residual_and_rms_normed, {xt, dt, w}));
}

TEST(ResidualRmsNorm, GradcheckWithOneOutputUnused) {
  Generator gen(42);
  const Tensor w = randn({9}, gen, 1, 0.5, DType::f64);
  const Tensor x = rnd({4, 9}, gen), delta = rnd({4, 9}, gen);
  EXPECT_TRUE(gradcheck_passes(
      [](const std::vector<Tensor>& in) { return residual_rms_norm(in[0], in[1], in[2]).normed; },
      {x, delta, w}));
  // Only the residual: d(x + delta) = dresidual for both, and no gradient for the weight.
  const Tensor wl = w.detach().set_requires_grad(true);
  const GradcheckFn residual_only = [&](const std::vector<Tensor>& in) {
    return residual_rms_norm(in[0], in[1], wl).residual * 2.0;
  };
  EXPECT_TRUE(gradcheck_passes(residual_only, {x, delta}));
  EXPECT_FALSE(wl.grad().defined());
}

TEST(ResidualRmsNorm, F32MatchesUnfusedAddAndPlainOpsOverSeveralChunks) {
  Generator gen(43);
  const Tensor x = randn({70, 13}, gen, 1, 2), delta = randn({70, 13}, gen, 1, 2);
  const Tensor w = randn({13}, gen), dout = randn({70, 26}, gen);
  const GradcheckFn unfused = [](const std::vector<Tensor>& in) {
    const Tensor s = in[0] + in[1];
    return concat({s, rms_norm_by_plain_ops(s, in[2], 1e-5)}, -1);
  };
  const std::vector<Tensor> fused = output_and_grads(residual_and_rms_normed, {x, delta, w}, dout);
  const std::vector<Tensor> reference = output_and_grads(unfused, {x, delta, w}, dout);
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_TRUE(all_close(fused[i], reference[i], 1e-5)) << "output/gradient " << i;
}

TEST(ResidualRmsNorm, IsOneNodeWithOneLaunchEachWay) {
  Generator gen(44);
  const Tensor x = randn({5, 8}, gen).set_requires_grad(true);
  const Tensor delta = randn({5, 8}, gen).set_requires_grad(true);
  const Tensor w = randn({8}, gen).set_requires_grad(true);
  LaunchLog log;
  const ResidualNorm r = residual_rms_norm(x, delta, w);
  EXPECT_EQ(r.residual.grad_fn(), r.normed.grad_fn());
  EXPECT_EQ(log.kernels(Phase::forward), std::vector<std::string>{"residual_rmsnorm_forward"});
  backward(sum(r.residual * r.normed));
  EXPECT_EQ(log.kernels_of_op("residual_rmsnorm"),
            (std::vector<std::string>{"residual_rmsnorm_forward", "residual_rmsnorm_backward"}));
  EXPECT_EQ(values(x.grad()), values(delta.grad()));
}

TEST(ResidualRmsNorm, BitIdenticalForAnyThreadCount) {
  Generator gen(45);
  const Tensor x = randn({300, 129}, gen), delta = randn({300, 129}, gen);
  const Tensor w = randn({129}, gen), dout = randn({300, 258}, gen);
  auto run = [&] {
    return f32_values(output_and_grads(residual_and_rms_normed, {x, delta, w}, dout));
  };
  EXPECT_EQ(with_threads(1, run), with_threads(2, run));
}

TEST(ResidualRmsNorm, RejectsMismatchedInputs) {
  const Tensor x = zeros({4, 6});
  EXPECT_TRUE(contains_all(error_of([&] {
                             residual_rms_norm(x, zeros({4, 5}), ones({6}));
                           }),
                           {"residual_rms_norm", "f32[4, 5]", "f32[4, 6]"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             residual_rms_norm(x, zeros({4, 6}, DType::f64), ones({6}));
                           }),
                           {"residual_rms_norm", "f64[4, 6]"}));
  EXPECT_TRUE(contains_all(error_of([&] { residual_rms_norm(x, x, ones({5})); }),
                           {"residual_rms_norm", "f32[5]"}));
}

}  // namespace
}  // namespace glass
