// Elementwise ops: f32 forward against naive loops (broadcasting both ways), gradcheck in f64
// for every op from one table (broadcast, non-contiguous and repeated inputs), dropout's
// determinism and generator use, and the errors for mismatched dtypes, shapes and devices.
#include <cmath>
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// A non-contiguous tensor of `shape` (2-D or more): the transpose of a contiguous one.
Tensor rnd_transposed(Shape shape, uint64_t seed) {
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return transpose(rnd(shape, seed), -1, -2);
}

// |x| + 0.5: inputs kept away from 0 for div and negative powers.
Tensor positive(const Shape& shape, uint64_t seed) {
  const std::vector<double> v = to_vector<double>(rnd(shape, seed));
  std::vector<double> p;
  for (double x : v) p.push_back(std::abs(x) + 0.5);
  return from_vector(p, shape);
}

TEST(Elementwise, BroadcastForwardMatchesNaive) {
  // a [4, 1, 3] op b [5, 1] -> [4, 5, 3]
  const Tensor a = rnd({4, 1, 3}, 1, DType::f32), b = rnd({5, 1}, 2, DType::f32);
  const std::vector<double> av = values(a), bv = values(b);
  std::vector<double> sum_ref, quot_ref;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 3; ++k) {
        sum_ref.push_back(av[i * 3 + k] + bv[j]);
        quot_ref.push_back(av[i * 3 + k] / bv[j]);
      }
  const Tensor s = a + b, q = a / b;
  EXPECT_EQ(s.shape(), (Shape{4, 5, 3}));
  EXPECT_TRUE(all_close(s, from_vector(sum_ref, {4, 5, 3}), 1e-6));
  EXPECT_TRUE(all_close(q, from_vector(quot_ref, {4, 5, 3}), 1e-6));
}

TEST(Elementwise, ScalarOpsGeluAndPowMatchNaive) {
  const Tensor x = rnd({7, 13}, 3, DType::f32);
  const std::vector<double> xv = values(x);
  std::vector<double> affine_ref, gelu_ref, cube_ref;
  for (double v : xv) {
    affine_ref.push_back(-(v * 3 + 1.5) / 2);
    gelu_ref.push_back(0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    cube_ref.push_back(v * v * v);
  }
  EXPECT_TRUE(all_close(-(x * 3.0 + 1.5) / 2.0, from_vector(affine_ref, {7, 13}), 1e-6));
  EXPECT_TRUE(all_close(gelu(x), from_vector(gelu_ref, {7, 13}), 1e-6));
  EXPECT_TRUE(all_close(pow(x, 3), from_vector(cube_ref, {7, 13}), 1e-6));
}

TEST(Elementwise, GradcheckEveryOp) {
  using V = const std::vector<Tensor>&;
  const GradCase cases[] = {
      {"add", {rnd({3, 5}, 10), rnd({3, 5}, 11)}, [](V x) { return x[0] + x[1]; }},
      {"add row broadcast", {rnd({3, 5}, 12), rnd({5}, 13)}, [](V x) { return x[0] + x[1]; }},
      {"sub both broadcast",
       {rnd({4, 1, 3}, 14), rnd({5, 1}, 15)},
       [](V x) { return x[0] - x[1]; }},
      {"mul broadcast", {rnd({2, 3, 4}, 16), rnd({3, 1}, 17)}, [](V x) { return x[0] * x[1]; }},
      {"mul same input", {rnd({7}, 18)}, [](V x) { return x[0] * x[0]; }},
      {"div broadcast b", {rnd({3, 5}, 19), positive({5}, 20)}, [](V x) { return x[0] / x[1]; }},
      {"div broadcast a", {rnd({5}, 21), positive({3, 5}, 22)}, [](V x) { return x[0] / x[1]; }},
      {"add non-contiguous",
       {rnd_transposed({3, 5}, 23), rnd({5}, 24)},
       [](V x) { return x[0] + x[1]; }},
      {"mul both non-contiguous",
       {rnd_transposed({4, 3}, 25), rnd_transposed({4, 3}, 26)},
       [](V x) { return x[0] * x[1]; }},
      {"scalar ops", {rnd({2, 7}, 27)}, [](V x) { return -(x[0] * 2.5 + 1.0); }},
      {"pow 3", {rnd({13}, 28)}, [](V x) { return pow(x[0], 3); }},
      {"pow -0.5", {positive({13}, 29)}, [](V x) { return pow(x[0], -0.5); }},
      {"pow 2 non-contiguous", {rnd_transposed({3, 5}, 30)}, [](V x) { return pow(x[0], 2); }},
      {"gelu", {rnd({7, 13}, 31)}, [](V x) { return gelu(x[0]); }},
      {"gelu non-contiguous", {rnd_transposed({5, 3}, 32)}, [](V x) { return gelu(x[0]); }},
      // A fresh generator per call: every evaluation draws the same mask.
      {"dropout",
       {rnd({9, 11}, 33)},
       [](V x) {
         Generator gen(5);
         return dropout(x[0], 0.4, true, gen);
       }},
  };
  for (const GradCase& c : cases) EXPECT_TRUE(gradcheck_passes(c.f, c.inputs)) << c.name;
}

TEST(Elementwise, DropoutUsesTheGeneratorDeterministically) {
  const Tensor x = ones({1001});
  Generator g1(9), g2(9);
  const Tensor y1 = dropout(x, 0.25, true, g1), y2 = dropout(x, 0.25, true, g2);
  EXPECT_EQ(to_vector<float>(y1), to_vector<float>(y2));  // same seed and offset, same mask
  EXPECT_EQ(g1.offset(), 251u);                           // ceil(1001 / 4) counter blocks
  // The next call continues the stream: another mask.
  EXPECT_NE(to_vector<float>(dropout(x, 0.25, true, g1)), to_vector<float>(y1));
  // Kept values are scaled by 1 / (1 - p); dropped ones are 0.
  for (float v : to_vector<float>(y1)) ASSERT_TRUE(v == 0.0f || std::abs(v - 1 / 0.75f) < 1e-6);
  // Evaluation and p = 0 return the input itself and draw nothing.
  EXPECT_TRUE(dropout(x, 0.25, false, g1).is_same(x));
  const uint64_t before = g1.offset();
  EXPECT_TRUE(dropout(x, 0.0, true, g1).is_same(x));
  EXPECT_EQ(g1.offset(), before);
}

TEST(Elementwise, BackwardReachesLeavesThroughBroadcast) {
  // d/da sum(a * b) = sum of b over a's broadcast dimension.
  Tensor a = rnd({3, 1}, 40, DType::f32).set_requires_grad(true);
  Tensor b = rnd({3, 4}, 41, DType::f32).set_requires_grad(true);
  backward(sum(a * b));
  const std::vector<double> bv = values(b), av = values(a);
  std::vector<double> da_ref(3, 0.0), db_ref;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      da_ref[i] += bv[i * 4 + j];
      db_ref.push_back(av[i]);
    }
  EXPECT_TRUE(all_close(a.grad(), from_vector(da_ref, {3, 1}), 1e-6));
  EXPECT_TRUE(all_close(b.grad(), from_vector(db_ref, {3, 4}), 1e-6));
}

TEST(Elementwise, ErrorsNameOpAndTensors) {
  const Tensor a = zeros({2, 3}), b = zeros({4});
  std::string e = error_of([&] { add(a, b); });
  EXPECT_TRUE(contains_all(e, {"add: shapes [2, 3] and [4] do not broadcast"}));
  e = error_of([&] { mul(a, zeros({2, 3}, DType::f64)); });
  EXPECT_TRUE(contains_all(e, {"mul: dtypes differ: f32[2, 3] on cpu and f64[2, 3] on cpu"}));
  e = error_of([&] { gelu(zeros({3}, DType::i32)); });
  EXPECT_TRUE(contains_all(e, {"gelu: expects a floating tensor, got i32[3]"}));
  e = error_of([&] { dropout(a, 1.5, true); });
  EXPECT_TRUE(contains_all(e, {"dropout: probability 1.5"}));
  e = error_of([&] { sub(zeros({2}, DType::i32), zeros({2}, DType::i32)); });
  EXPECT_TRUE(contains_all(e, {"sub: expects a floating tensor"}));
}

}  // namespace
}  // namespace glass
