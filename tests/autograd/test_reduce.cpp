// sum and mean: f32 forward against naive loops for every combination of dims (negative,
// keepdim, all), adjacent reduced dims merged into one launch, gradcheck in f64 (non-contiguous
// inputs included), and the errors for bad dims and dtypes.
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// x [3, 4, 5] summed over the dims flagged in `mask` (bit d = dim d), naive, keepdim layout.
std::vector<double> naive_sum(const std::vector<double>& x, int mask) {
  const int n[3] = {3, 4, 5};
  int out_n[3];
  for (int d = 0; d < 3; ++d) out_n[d] = (mask >> d & 1) ? 1 : n[d];
  std::vector<double> out(static_cast<size_t>(out_n[0] * out_n[1] * out_n[2]), 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) {
        const int oi = out_n[0] == 1 ? 0 : i, oj = out_n[1] == 1 ? 0 : j,
                  ok = out_n[2] == 1 ? 0 : k;
        out[(oi * out_n[1] + oj) * out_n[2] + ok] += x[(i * 4 + j) * 5 + k];
      }
  return out;
}

TEST(Reduce, SumAndMeanMatchNaiveForEveryDimSet) {
  const Tensor x = rnd({3, 4, 5}, 1, DType::f32);
  const std::vector<double> xv = values(x);
  const Shape full = {3, 4, 5};
  for (int mask = 1; mask < 8; ++mask) {
    std::vector<int> dims;
    Shape keep = full, dropped;
    int64_t count = 1;
    for (int d = 0; d < 3; ++d) {
      if (mask >> d & 1) {
        dims.push_back(d - 3);  // negative dims
        keep[d] = 1;
        count *= full[d];
      } else {
        dropped.push_back(full[d]);
      }
    }
    const std::vector<double> ref = naive_sum(xv, mask);
    std::vector<double> mean_ref = ref;
    for (double& v : mean_ref) v /= static_cast<double>(count);
    EXPECT_TRUE(all_close(sum(x, dims, true), from_vector(ref, keep), 1e-6)) << mask;
    EXPECT_TRUE(all_close(sum(x, dims), from_vector(ref, dropped), 1e-6)) << mask;
    EXPECT_TRUE(all_close(mean(x, dims, true), from_vector(mean_ref, keep), 1e-6)) << mask;
  }
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_NEAR(item(sum(x)), naive_sum(xv, 7)[0], 1e-5);
  EXPECT_NEAR(item(mean(x)), naive_sum(xv, 7)[0] / 60, 1e-6);
  EXPECT_EQ(item(sum(glass::full(Shape{}, 2.5))), 2.5);  // a 0-d tensor sums to itself
}

TEST(Reduce, AdjacentDimsAreOneLaunch) {
  // [B, T, C] summed over (B, T): the bias-gradient shape, one sum_dim over [B*T, C].
  const Tensor x = rnd({4, 7, 3}, 2, DType::f32);
  LaunchLog log;
  const Tensor s = sum(x, {0, 1});
  EXPECT_EQ(log.kernels(), (std::vector<std::string>{"sum_dim"}));
  EXPECT_TRUE(all_close(s, sum(sum(x, {0}), {0}), 1e-6));
}

TEST(Reduce, GradcheckSumAndMean) {
  using V = const std::vector<Tensor>&;
  const Tensor nc = transpose(rnd({5, 3}, 3), 0, 1);  // non-contiguous [3, 5]
  const GradCase cases[] = {
      {"sum all", {rnd({3, 4}, 4)}, [](V x) { return sum(x[0]); }},
      {"sum dim 0", {rnd({3, 4, 5}, 5)}, [](V x) { return sum(x[0], {0}); }},
      {"sum dim -1 keepdim", {rnd({3, 4, 5}, 6)}, [](V x) { return sum(x[0], {-1}, true); }},
      {"sum dims 0, 2",
       {rnd({3, 4, 5}, 7)},
       [](V x) {
         return sum(x[0], {0, 2});
       }},
      {"sum dims 1, 0 keepdim",
       {rnd({3, 4, 5}, 8)},
       [](V x) {
         return sum(x[0], {1, 0}, true);
       }},
      {"sum non-contiguous", {nc}, [](V x) { return sum(x[0], {1}); }},
      {"mean all", {rnd({7, 3}, 9)}, [](V x) { return mean(x[0]); }},
      {"mean dim 1", {rnd({3, 4, 5}, 10)}, [](V x) { return mean(x[0], {1}); }},
      {"mean non-contiguous keepdim", {nc}, [](V x) { return mean(x[0], {0}, true); }},
  };
  for (const GradCase& c : cases) EXPECT_TRUE(gradcheck_passes(c.f, c.inputs)) << c.name;
}

TEST(Reduce, ErrorsNameOpAndTensor) {
  const Tensor x = zeros({2, 3});
  std::string e = error_of([&] { sum(x, {0, -2}); });
  EXPECT_TRUE(contains_all(e, {"sum: dimension -2 is listed twice for f32[2, 3]"}));
  e = error_of([&] { mean(x, {2}); });
  EXPECT_TRUE(contains_all(e, {"dimension 2 out of range for f32[2, 3]"}));
  e = error_of([&] { sum(zeros({4}, DType::i32)); });
  EXPECT_TRUE(contains_all(e, {"sum: expects a floating tensor, got i32[4]"}));
}

}  // namespace
}  // namespace glass
