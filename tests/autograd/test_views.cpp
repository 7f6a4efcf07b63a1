// Views and copies: views share storage and launch nothing, reshape copies only when strides
// force it, contiguous() is one visible copy, every view's values match index arithmetic done
// here, gradcheck covers each op (non-contiguous inputs included), and errors name the op.
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// 0, 1, 2, ... as f32 of `shape`: element values that name their row-major index.
Tensor iota(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return from_vector(v, shape);
}

std::vector<float> vals(const Tensor& t) { return to_vector<float>(t); }

TEST(Views, ViewsShareStorageAndLaunchNothing) {
  const Tensor x = iota({2, 3, 4});
  LaunchLog log;
  const std::vector<Tensor> views = {view(x, {6, -1}),
                                     reshape(x, {4, 6}),
                                     transpose(x, 0, 2),
                                     permute(x, {1, 2, 0}),
                                     slice(x, 1, 1, 3),
                                     split(x, 3, -1)[1],
                                     expand(slice(x, 0, 0, 1), {5, 3, 4})};
  EXPECT_TRUE(log.records.empty()) << log.kernels().front();
  for (const Tensor& v : views) EXPECT_EQ(v.storage(), x.storage()) << v.describe();
  EXPECT_EQ(views[0].shape(), (Shape{6, 4}));
}

TEST(Views, ValuesFollowIndexArithmetic) {
  const Tensor x = iota({2, 3, 4});  // x[i][j][k] = 12 i + 4 j + k
  std::vector<float> ref;
  for (int k = 0; k < 4; ++k)  // transpose(0, 2): [4, 3, 2], element [k][j][i]
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) ref.push_back(static_cast<float>(12 * i + 4 * j + k));
  EXPECT_EQ(vals(transpose(x, 0, 2)), ref);
  ref.clear();
  for (int j = 0; j < 3; ++j)  // permute {1, 2, 0}: [3, 4, 2], element [j][k][i]
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i) ref.push_back(static_cast<float>(12 * i + 4 * j + k));
  EXPECT_EQ(vals(permute(x, {1, 2, 0})), ref);
  ref.clear();
  for (int i = 0; i < 2; ++i)  // slice(-1, 1, -1): k in [1, 3)
    for (int j = 0; j < 3; ++j)
      for (int k = 1; k < 3; ++k) ref.push_back(static_cast<float>(12 * i + 4 * j + k));
  EXPECT_EQ(vals(slice(x, -1, 1, -1)), ref);
  // split into chunks of 2 along dim 1 (size 3): [2, 2, 4] and the tail [2, 1, 4]
  const std::vector<Tensor> parts = split(x, 2, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape(), (Shape{2, 1, 4}));
  EXPECT_EQ(vals(parts[1]), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  // concat puts them back
  EXPECT_EQ(vals(concat(parts, 1)), vals(x));
  // expand repeats along stride-0 dimensions
  EXPECT_EQ(vals(expand(iota({2, 1}), {3, 2, 2})),
            (std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1}));
}

TEST(Views, ReshapeCopiesOnlyWhenStridesForceIt) {
  const Tensor x = iota({4, 6});
  // A column slice [4, 3] (strides [6, 1]) can split its rows but not merge them with columns.
  const Tensor cols = slice(x, 1, 0, 3);
  EXPECT_EQ(view(cols, {2, 2, 3}).storage(), x.storage());
  EXPECT_EQ(view(cols, {2, 2, 3}).strides(), (Shape{12, 6, 1}));
  EXPECT_TRUE(contains_all(error_of([&] { view(cols, {12}); }), {"use reshape"}));
  LaunchLog log;
  const Tensor flat = reshape(cols, {12});
  EXPECT_EQ(log.kernels(), (std::vector<std::string>{"copy"}));
  EXPECT_EQ(vals(flat), (std::vector<float>{0, 1, 2, 6, 7, 8, 12, 13, 14, 18, 19, 20}));
  // A transposed matrix flattens only by copying; a transposed view of it back does not.
  const Tensor t = transpose(x, 0, 1);
  EXPECT_NE(reshape(t, {24}).storage(), x.storage());
  EXPECT_EQ(reshape(transpose(t, 0, 1), {24}).storage(), x.storage());
}

TEST(Views, ContiguousIsXItselfOrOneRecordedCopy) {
  Tensor x = rnd({3, 5}, 1, DType::f32).set_requires_grad(true);
  EXPECT_TRUE(contiguous(x).is_same(x));
  LaunchLog log;
  const Tensor c = contiguous(transpose(x, 0, 1));
  EXPECT_EQ(log.kernels(), (std::vector<std::string>{"copy"}));
  EXPECT_TRUE(c.is_contiguous());
  ASSERT_NE(c.grad_fn(), nullptr);
  EXPECT_STREQ(c.grad_fn()->op, "contiguous");
  EXPECT_EQ(vals(c), vals(transpose(x.detach(), 0, 1)));
}

TEST(Views, GradcheckEveryView) {
  using V = const std::vector<Tensor>&;
  // A non-contiguous [4, 6] input: the transpose of a [6, 4].
  const Tensor nc = transpose(rnd({6, 4}, 2), 0, 1);
  const GradCase cases[] = {
      {"view",
       {rnd({2, 3, 4}, 3)},
       [](V x) {
         return view(x[0], {4, -1});
       }},
      {"reshape (copy)",
       {nc},
       [](V x) {
         return reshape(x[0], {3, 8});
       }},
      {"transpose", {rnd({2, 3, 5}, 4)}, [](V x) { return transpose(x[0], 0, -1); }},
      {"permute",
       {rnd({2, 3, 5}, 5)},
       [](V x) {
         return permute(x[0], {2, 0, 1});
       }},
      {"slice", {nc}, [](V x) { return slice(x[0], 1, -5, 4); }},
      {"split",
       {rnd({7, 3}, 6)},
       [](V x) {
         const std::vector<Tensor> p = split(x[0], 3, 0);  // [3, 3], [3, 3], [1, 3]
         return p[0] * p[1] + p[2];
       }},
      {"concat",
       {rnd({4, 3}, 7), nc, rnd({4, 1}, 8)},
       [](V x) {
         return concat({x[0] * x[0], x[1], x[2]}, -1);
       }},
      {"contiguous", {nc}, [](V x) { return contiguous(x[0]); }},
      {"expand",
       {rnd({3, 1}, 9)},
       [](V x) {
         return expand(x[0], {2, 3, 4});
       }},
      {"sum_to",
       {rnd({2, 3, 4}, 10)},
       [](V x) {
         return sum_to(x[0], {3, 1});
       }},
  };
  for (const GradCase& c : cases) EXPECT_TRUE(gradcheck_passes(c.f, c.inputs)) << c.name;
}

TEST(Views, BroadcastShapesAndSumTo) {
  EXPECT_EQ(broadcast_shapes({4, 1, 3}, {5, 1}, "t"), (Shape{4, 5, 3}));
  EXPECT_EQ(broadcast_shapes({}, {2, 3}, "t"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 7}, "t"), (Shape{0, 7}));
  // sum_to([2, 3, 4] -> [3, 1]) sums dims 0 and 2.
  const Tensor g = iota({2, 3, 4});
  std::vector<double> ref(3, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) ref[j] += 12 * i + 4 * j + k;
  EXPECT_EQ(values(sum_to(g, {3, 1})), ref);
  EXPECT_TRUE(sum_to(g, {2, 3, 4}).is_same(g));
}

TEST(Views, ErrorsNameOpAndShapes) {
  const Tensor x = zeros({2, 3});
  std::string e = error_of([&] { view(x, {4, -1}); });
  EXPECT_TRUE(contains_all(e, {"view: cannot infer the -1 in shape [4, -1]"}));
  e = error_of([&] { reshape(x, {7}); });
  EXPECT_TRUE(contains_all(e, {"reshape: shape [7] does not hold the 6 elements"}));
  e = error_of([&] { permute(x, {0, 0}); });
  EXPECT_TRUE(contains_all(e, {"permute: dims 0, 0 are not a permutation"}));
  e = error_of([&] { slice(x, 1, 2, 5); });
  EXPECT_TRUE(contains_all(e, {"slice: [2, 5) is not within dim 1 (size 3)"}));
  e = error_of([&] { transpose(x, 0, 2); });
  EXPECT_TRUE(contains_all(e, {"dimension 2 out of range for f32[2, 3]"}));
  e = error_of([&] { concat({x, zeros({3, 3})}, 1); });
  EXPECT_TRUE(contains_all(e, {"concat: f32[3, 3] on cpu does not match f32[2, 3] on cpu"}));
  e = error_of([&] { expand(x, {4, 3}); });
  EXPECT_TRUE(contains_all(e, {"expand: f32[2, 3] on cpu cannot be expanded to [4, 3]"}));
  e = error_of([&] { broadcast_shapes({2, 3}, {4}, "add"); });
  EXPECT_TRUE(contains_all(e, {"add: shapes [2, 3] and [4] do not broadcast"}));
  e = error_of([&] { split(x, 0, 0); });
  EXPECT_TRUE(contains_all(e, {"split: chunk size 0"}));
}

}  // namespace
}  // namespace glass
