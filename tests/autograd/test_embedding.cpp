// embedding: the gather against naive indexing, the table gradient by gradcheck in f64 (repeated
// ids, a non-contiguous table) and against a naive scatter-add, and the errors.
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

const std::vector<int32_t> kIds = {3, 0, 6, 3, 3, 1};  // [2, 3], id 3 three times

TEST(Embedding, GatherAndScatterAddMatchNaive) {
  const Tensor ids = from_vector(kIds, {2, 3});
  Tensor table = rnd({7, 5}, 1, DType::f32).set_requires_grad(true);
  const Tensor out = embedding(ids, table);
  EXPECT_EQ(out.shape(), (Shape{2, 3, 5}));
  const std::vector<double> tv = values(table);
  std::vector<double> ref;
  for (int32_t id : kIds)
    for (int c = 0; c < 5; ++c) ref.push_back(tv[id * 5 + c]);
  EXPECT_EQ(values(out), ref);

  const Tensor dy = rnd({2, 3, 5}, 2, DType::f32);
  backward(out, dy);
  const std::vector<double> dyv = values(dy);
  std::vector<double> dref(35, 0.0);
  for (size_t i = 0; i < kIds.size(); ++i)
    for (int c = 0; c < 5; ++c) dref[kIds[i] * 5 + c] += dyv[i * 5 + c];
  EXPECT_TRUE(all_close(table.grad(), from_vector(dref, {7, 5}), 1e-6));
}

TEST(Embedding, Gradcheck) {
  const Tensor ids = from_vector(kIds, {2, 3});
  const auto f = [](const std::vector<Tensor>& x) { return embedding(x[0], x[1]); };
  EXPECT_TRUE(gradcheck_passes(f, {ids, rnd({7, 5}, 3)}));
  EXPECT_TRUE(gradcheck_passes(f, {ids, transpose(rnd({5, 7}, 4), 0, 1)}));  // non-contiguous
}

TEST(Embedding, ErrorsNameIdsAndTable) {
  const Tensor table = zeros({4, 3});
  std::string e = error_of([&] { embedding(from_vector<int32_t>({1, 2, 9}, {3}), table); });
  EXPECT_TRUE(contains_all(e, {"id 9 at position 2 is outside the table's rows [0, 4)"}));
  e = error_of([&] { embedding(from_vector<int32_t>({-1}, {1}), table); });
  EXPECT_TRUE(contains_all(e, {"id -1 at position 0"}));
  e = error_of([&] { embedding(zeros({3}), table); });
  EXPECT_TRUE(contains_all(e, {"embedding: ids f32[3] on cpu must be i32"}));
  e = error_of([&] { embedding(from_vector<int32_t>({0}, {1}), zeros({4})); });
  EXPECT_TRUE(contains_all(e, {"embedding: table f32[4] on cpu must be a floating [V, C] matrix"}));
}

}  // namespace
}  // namespace glass
