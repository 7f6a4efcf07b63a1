// layer_norm: the f32 kernels against naive loops in double (forward, and backward over several
// fixed row chunks), gradcheck in f64 (odd sizes, non-contiguous x), bit-identical results for any
// thread count, and the errors for mismatched parameters.
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

}  // namespace
}  // namespace glass
