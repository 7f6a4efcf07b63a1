// layer_norm: the f32 kernels against naive loops in double (forward, and backward over several
// fixed row chunks), gradcheck in f64 (odd sizes, non-contiguous x), bit-identical results for any
// thread count, and the errors for mismatched parameters.
// residual_layer_norm (the residual add fused with it, one node with two outputs): gradcheck in
// f64 with both outputs used and with either one alone, f32 against the unfused add + layer_norm
// over several row chunks, one node with one launch each way, bit-identical for any thread count,
// and its errors.
#include <cmath>
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// xhat of each `C`-wide row, in double.
std::vector<double> naive_xhat(const std::vector<double>& x, size_t C, double eps) {
  std::vector<double> xhat(x.size());
  for (size_t r = 0; r < x.size() / C; ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < C; ++j) mean += x[r * C + j] / static_cast<double>(C);
    for (size_t j = 0; j < C; ++j) var += std::pow(x[r * C + j] - mean, 2) / static_cast<double>(C);
    for (size_t j = 0; j < C; ++j) xhat[r * C + j] = (x[r * C + j] - mean) / std::sqrt(var + eps);
  }
  return xhat;
}

TEST(LayerNorm, ForwardF32MatchesNaive) {
  Generator gen(11);
  const Tensor x = randn({3, 5, 13}, gen, 2, 3);  // mean far from 0: tests the two-pass variance
  const Tensor w = randn({13}, gen), b = randn({13}, gen);
  std::vector<double> ref = naive_xhat(values(x), 13, 1e-5);
  const std::vector<double> wv = values(w), bv = values(b);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = ref[i] * wv[i % 13] + bv[i % 13];
  EXPECT_TRUE(all_close(layer_norm(x, w, b), from_vector(ref, {3, 5, 13}), 1e-5));
}

TEST(LayerNorm, Gradcheck) {
  Generator gen(12);
  auto f = [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-5); };
  const Tensor w = randn({7}, gen, 1, 0.5, DType::f64), b = rnd({7}, gen);
  const Tensor x = rnd({5, 7}, gen);
  const Tensor xt = transpose(rnd({7, 5}, gen), 0, 1);  // non-contiguous
  for (const Tensor& input : {x, xt})
    EXPECT_TRUE(gradcheck_passes(f, {input, w, b})) << input.describe();
}

TEST(LayerNorm, BackwardF32MatchesNaiveOverSeveralChunks) {
  Generator gen(13);
  const size_t N = 70, C = 13;  // 70 rows: two full chunks of 32 and a tail
  const Tensor x = randn({70, 13}, gen, 1, 2).set_requires_grad(true);
  const Tensor w = randn({13}, gen).set_requires_grad(true);
  const Tensor b = randn({13}, gen).set_requires_grad(true);
  const Tensor dy = randn({70, 13}, gen);
  backward(layer_norm(x, w, b), dy);

  const std::vector<double> xhat = naive_xhat(values(x), C, 1e-5), wv = values(w), g = values(dy);
  const std::vector<double> xv = values(x);
  std::vector<double> dx(N * C), dw(C, 0), db(C, 0);
  for (size_t r = 0; r < N; ++r) {
    double var = 0, mean = 0, m1 = 0, m2 = 0;
    for (size_t j = 0; j < C; ++j) mean += xv[r * C + j] / C;
    for (size_t j = 0; j < C; ++j) var += std::pow(xv[r * C + j] - mean, 2) / C;
    for (size_t j = 0; j < C; ++j) {
      m1 += g[r * C + j] * wv[j] / C;
      m2 += g[r * C + j] * wv[j] * xhat[r * C + j] / C;
      dw[j] += g[r * C + j] * xhat[r * C + j];
      db[j] += g[r * C + j];
    }
    for (size_t j = 0; j < C; ++j)
      dx[r * C + j] = (g[r * C + j] * wv[j] - m1 - xhat[r * C + j] * m2) / std::sqrt(var + 1e-5);
  }
  EXPECT_TRUE(all_close(x.grad(), from_vector(dx, {70, 13}), 1e-5));
  EXPECT_TRUE(all_close(w.grad(), from_vector(dw, {13}), 1e-5));
  EXPECT_TRUE(all_close(b.grad(), from_vector(db, {13}), 1e-5));
}

TEST(LayerNorm, BitIdenticalForAnyThreadCount) {
  Generator gen(14);
  const Tensor x = randn({300, 129}, gen), dy = randn({300, 129}, gen);  // big enough to thread
  const Tensor w = randn({129}, gen), b = randn({129}, gen);
  const GradcheckFn f = [](const std::vector<Tensor>& in) {
    return layer_norm(in[0], in[1], in[2]);
  };
  auto run = [&] { return f32_values(output_and_grads(f, {x, w, b}, dy)); };
  EXPECT_EQ(with_threads(1, run), with_threads(2, run));
}

TEST(LayerNorm, RejectsMismatchedParameters) {
  const Tensor x = zeros({4, 6});
  const std::string size = error_of([&] { layer_norm(x, ones({5}), zeros({6})); });
  EXPECT_TRUE(contains_all(size, {"f32[5]"}));
  const std::string dtype = error_of([&] { layer_norm(x, ones({6}), zeros({6}, DType::f64)); });
  EXPECT_TRUE(contains_all(dtype, {"f64[6]"}));
}

// Both outputs of residual_layer_norm side by side, so that gradcheck's random projection weighs
// the gradient arriving at each one independently.
Tensor residual_and_normed(const std::vector<Tensor>& in) {
  const ResidualNorm r = residual_layer_norm(in[0], in[1], in[2], in[3], 1e-5);
  return concat({r.residual, r.normed}, -1);
}

TEST(ResidualLayerNorm, Gradcheck) {
  Generator gen(21);
  const Tensor w = randn({7}, gen, 1, 0.5, DType::f64), b = rnd({7}, gen);
  const Tensor x = rnd({3, 5, 7}, gen), delta = rnd({3, 5, 7}, gen);
  EXPECT_TRUE(gradcheck_passes(residual_and_normed, {x, delta, w, b}));
  // Non-contiguous inputs.
  const Tensor xt = transpose(rnd({7, 5}, gen), 0, 1), dt = transpose(rnd({7, 5}, gen), 0, 1);
  EXPECT_TRUE(gradcheck_passes(residual_and_normed, {xt, dt, w, b}));
}

TEST(ResidualLayerNorm, GradcheckWithOneOutputUnused) {
  Generator gen(22);
  const Tensor w = randn({9}, gen, 1, 0.5, DType::f64), b = rnd({9}, gen);
  const Tensor x = rnd({4, 9}, gen), delta = rnd({4, 9}, gen);
  // Only the normalised output (the last block's sum, read only by ln_f): plain LayerNorm backward.
  EXPECT_TRUE(gradcheck_passes(
      [](const std::vector<Tensor>& in) {
        return residual_layer_norm(in[0], in[1], in[2], in[3]).normed;
      },
      {x, delta, w, b}));
  // Only the residual: d(x + delta) = dresidual for both, and no gradient for weight and bias.
  const Tensor wl = w.detach().set_requires_grad(true), bl = b.detach().set_requires_grad(true);
  const GradcheckFn residual_only = [&](const std::vector<Tensor>& in) {
    return residual_layer_norm(in[0], in[1], wl, bl).residual * 2.0;
  };
  EXPECT_TRUE(gradcheck_passes(residual_only, {x, delta}));
  EXPECT_FALSE(wl.grad().defined());
  EXPECT_FALSE(bl.grad().defined());
}

TEST(ResidualLayerNorm, F32MatchesUnfusedAddAndLayerNormOverSeveralChunks) {
  Generator gen(23);
  // 70 rows: two full chunks of 32 and a tail; the mean far from 0.
  const Tensor x = randn({70, 13}, gen, 1, 2), delta = randn({70, 13}, gen, 1, 2);
  const Tensor w = randn({13}, gen), b = randn({13}, gen), dout = randn({70, 26}, gen);
  const GradcheckFn unfused = [](const std::vector<Tensor>& in) {
    const Tensor s = in[0] + in[1];
    return concat({s, layer_norm(s, in[2], in[3])}, -1);
  };
  const std::vector<Tensor> fused = output_and_grads(residual_and_normed, {x, delta, w, b}, dout);
  const std::vector<Tensor> reference = output_and_grads(unfused, {x, delta, w, b}, dout);
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_TRUE(all_close(fused[i], reference[i], 1e-5)) << "output/gradient " << i;
}

TEST(ResidualLayerNorm, IsOneNodeWithOneLaunchEachWay) {
  Generator gen(24);
  const Tensor x = randn({5, 8}, gen).set_requires_grad(true);
  const Tensor delta = randn({5, 8}, gen).set_requires_grad(true);
  const Tensor w = randn({8}, gen).set_requires_grad(true), b = randn({8}, gen);
  LaunchLog log;
  const ResidualNorm r = residual_layer_norm(x, delta, w, b);
  EXPECT_EQ(r.residual.grad_fn(), r.normed.grad_fn());
  EXPECT_EQ(log.kernels(Phase::forward), std::vector<std::string>{"residual_layernorm_forward"});
  backward(sum(r.residual * r.normed));
  EXPECT_EQ(
      log.kernels_of_op("residual_layernorm"),
      (std::vector<std::string>{"residual_layernorm_forward", "residual_layernorm_backward"}));
  // x and delta get the same gradient, the residual's: dresidual + LayerNorm's dx.
  EXPECT_EQ(values(x.grad()), values(delta.grad()));
}

TEST(ResidualLayerNorm, BitIdenticalForAnyThreadCount) {
  Generator gen(25);
  const Tensor x = randn({300, 129}, gen), delta = randn({300, 129}, gen);
  const Tensor w = randn({129}, gen), b = randn({129}, gen), dout = randn({300, 258}, gen);
  auto run = [&] {
    return f32_values(output_and_grads(residual_and_normed, {x, delta, w, b}, dout));
  };
  EXPECT_EQ(with_threads(1, run), with_threads(2, run));
}

TEST(ResidualLayerNorm, RejectsMismatchedInputs) {
  const Tensor x = zeros({4, 6});
  const std::string shape = error_of([&] {
    residual_layer_norm(x, zeros({4, 5}), ones({6}), zeros({6}));
  });
  EXPECT_TRUE(contains_all(shape, {"residual_layer_norm", "f32[4, 5]", "f32[4, 6]"}));
  const std::string dtype = error_of([&] {
    residual_layer_norm(x, zeros({4, 6}, DType::f64), ones({6}), zeros({6}));
  });
  EXPECT_TRUE(contains_all(dtype, {"residual_layer_norm", "f64[4, 6]"}));
  const std::string param = error_of([&] { residual_layer_norm(x, x, ones({5}), zeros({6})); });
  EXPECT_TRUE(contains_all(param, {"residual_layer_norm", "f32[5]"}));
}

}  // namespace
}  // namespace glass
