// softmax, log_softmax and cross_entropy: the f32 kernels against naive loops in double, every
// gradient by gradcheck in f64 (odd sizes, non-contiguous inputs, ignored rows), and the errors
// for bad targets, dtypes and shapes.
#include <cmath>
#include <limits>
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// Naive log-softmax of each `cols`-wide row, in double.
std::vector<double> naive_log_softmax(const std::vector<double>& x, size_t cols) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / cols; ++r) {
    const double* xr = &x[r * cols];
    double m = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < cols; ++j) m = std::max(m, xr[j]);
    double s = 0;
    for (size_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
    for (size_t j = 0; j < cols; ++j) y[r * cols + j] = xr[j] - m - std::log(s);
  }
  return y;
}

std::vector<double> naive_softmax(const std::vector<double>& x, size_t cols) {
  std::vector<double> y = naive_log_softmax(x, cols);
  for (double& v : y) v = std::exp(v);
  return y;
}

// Naive mean cross-entropy over the rows whose target is not ignore_index.
double naive_cross_entropy(const std::vector<double>& logits, const std::vector<int32_t>& targets,
                           size_t V, int64_t ignore_index) {
  const std::vector<double> logp = naive_log_softmax(logits, V);
  double sum = 0, valid = 0;
  for (size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] == ignore_index) continue;
    sum -= logp[r * V + static_cast<size_t>(targets[r])];
    valid += 1;
  }
  return sum / valid;
}

TEST(Softmax, ForwardF32MatchesNaive) {
  Generator gen(1);
  const Tensor x = randn({3, 5, 13}, gen, 0, 4);
  EXPECT_TRUE(all_close(softmax(x), from_vector(naive_softmax(values(x), 13), {3, 5, 13}), 1e-6));
  EXPECT_TRUE(
      all_close(log_softmax(x), from_vector(naive_log_softmax(values(x), 13), {3, 5, 13}), 1e-6));
}

TEST(Softmax, LargeLogitsStayFinite) {
  Generator gen(2);
  // rows around +1000 and -1000: exp without the max shift would overflow or vanish
  Tensor x = randn({4, 7}, gen, 0, 3);
  std::vector<float> xv = to_vector<float>(x);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] += i < 14 ? 1000.f : -1000.f;
  x = from_vector(xv, {4, 7});
  const std::vector<double> ref = naive_softmax(values(x), 7);
  EXPECT_TRUE(all_close(softmax(x), from_vector(ref, {4, 7}), 1e-6));
  const std::vector<double> ref_log = naive_log_softmax(values(x), 7);
  EXPECT_TRUE(all_close(log_softmax(x), from_vector(ref_log, {4, 7}), 1e-6));
}

TEST(Softmax, Gradcheck) {
  Generator gen(3);
  const Tensor x = rnd({5, 7}, gen);
  const Tensor xt = transpose(rnd({7, 5}, gen), 0, 1);  // non-contiguous
  for (auto* op : {&softmax, &log_softmax}) {
    auto f = [op](const std::vector<Tensor>& in) { return op(in[0], CallSite::current()); };
    for (const Tensor& input : {x, xt})
      EXPECT_TRUE(gradcheck_passes(f, {input})) << input.describe();
  }
}

TEST(CrossEntropy, ForwardF32MatchesNaiveWithIgnoredRows) {
  Generator gen(4);
  const Tensor logits = randn({2, 3, 11}, gen, 0, 2);
  const std::vector<int32_t> t = {3, -100, 10, 0, -100, 7};
  const Tensor loss = cross_entropy(logits, from_vector(t, {2, 3}));
  EXPECT_EQ(loss.shape(), Shape{});
  EXPECT_NEAR(item(loss), naive_cross_entropy(values(logits), t, 11, -100), 1e-5);
  // an ignore_index inside [0, V) drops the rows of that class instead
  const std::vector<int32_t> t2 = {3, 4, 10, 3, 1, 7};
  EXPECT_NEAR(item(cross_entropy(logits, from_vector(t2, {2, 3}), 3)),
              naive_cross_entropy(values(logits), t2, 11, 3), 1e-5);
}

TEST(CrossEntropy, Gradcheck) {
  Generator gen(5);
  auto f = [](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); };
  EXPECT_TRUE(
      gradcheck_passes(f, {rnd({5, 7}, gen), from_vector<int32_t>({6, 0, -100, 3, 3}, {5})}));
  const Tensor logits3 = rnd({2, 3, 7}, gen);
  EXPECT_TRUE(gradcheck_passes(f, {logits3, from_vector<int32_t>({1, 2, 6, -100, 0, 5}, {2, 3})}));
}

TEST(CrossEntropy, GradientF32IsSoftmaxMinusOnehotOverValid) {
  Generator gen(6);
  const Tensor logits = randn({6, 9}, gen, 0, 2).set_requires_grad(true);
  const std::vector<int32_t> t = {8, -100, 0, 4, -100, 2};
  backward(cross_entropy(logits, from_vector(t, {6})));
  std::vector<double> expected = naive_softmax(values(logits), 9);
  for (size_t r = 0; r < t.size(); ++r)
    for (size_t j = 0; j < 9; ++j) {
      double& e = expected[r * 9 + j];
      e = t[r] == -100 ? 0.0 : (e - (static_cast<int32_t>(j) == t[r])) / 4.0;  // 4 valid rows
    }
  EXPECT_TRUE(all_close(logits.grad(), from_vector(expected, {6, 9}), 1e-6));
}

TEST(CrossEntropy, AllTargetsIgnoredGivesNaNLossAndZeroGradient) {
  const Tensor logits = zeros({2, 3}).set_requires_grad(true);
  const Tensor loss = cross_entropy(logits, from_vector<int32_t>({-100, -100}, {2}));
  EXPECT_TRUE(std::isnan(item(loss)));
  backward(loss);
  for (float g : to_vector<float>(logits.grad())) EXPECT_EQ(g, 0.0f);
}

TEST(CrossEntropy, BadTargetNamesRowAndValue) {
  const Tensor logits = zeros({4, 7});
  const std::string too_big = error_of([&] {
    cross_entropy(logits, from_vector<int32_t>({0, 2, 7, 1}, {4}));
  });
  EXPECT_TRUE(contains_all(too_big, {"target 7 at row 2"}));
  const std::string negative = error_of([&] {
    cross_entropy(logits, from_vector<int32_t>({0, -1, 3, 1}, {4}));
  });
  EXPECT_TRUE(contains_all(negative, {"target -1 at row 1"}));
}

TEST(CrossEntropy, RejectsWrongDtypeAndShape) {
  const Tensor logits = zeros({4, 7});
  const std::string dtype = error_of([&] { cross_entropy(logits, zeros({4})); });
  EXPECT_TRUE(contains_all(dtype, {"must be i32"}));
  const std::string shape = error_of([&] { cross_entropy(logits, zeros({5}, DType::i32)); });
  EXPECT_TRUE(contains_all(shape, {"f32[4, 7]"}));
  EXPECT_TRUE(contains_all(shape, {"i32[5]"}));
}

}  // namespace
}  // namespace glass
