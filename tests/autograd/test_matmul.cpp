// matmul and linear: f32 forward against naive loops (batched, broadcast batch dims, transposed
// operands, bias), the launches they make (transposed views are GEMM flags, never copies; a
// shared matrix folds the batch into one GEMM), gradcheck in f64, and the errors.
#include <string>

#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// Naive a [batch, m, k] @ b [batch or 1, k, n] in double; b's batch repeats when it is 1.
std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b,
                                 int batch, int b_batch, int m, int k, int n) {
  std::vector<double> c(static_cast<size_t>(batch * m * n), 0.0);
  for (int bi = 0; bi < batch; ++bi) {
    const int bb = b_batch == 1 ? 0 : bi;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j)
        for (int p = 0; p < k; ++p)
          c[(bi * m + i) * n + j] += a[(bi * m + i) * k + p] * b[(bb * k + p) * n + j];
  }
  return c;
}

TEST(Matmul, ForwardMatchesNaive) {
  // Batched with a shared right matrix, broadcast batch dims, and a transposed right operand.
  const Tensor a = rnd({2, 3, 7, 5}, 1, DType::f32), w = rnd({5, 4}, 2, DType::f32);
  EXPECT_TRUE(all_close(
      matmul(a, w), from_vector(naive_matmul(values(a), values(w), 6, 1, 7, 5, 4), {2, 3, 7, 4}),
      1e-6));
  const Tensor b = rnd({3, 5, 4}, 3, DType::f32);  // [2, 3] x [3] batches -> [2, 3]
  std::vector<double> bv = values(b), bb;
  for (int rep = 0; rep < 2; ++rep) bb.insert(bb.end(), bv.begin(), bv.end());
  EXPECT_TRUE(all_close(
      matmul(a, b), from_vector(naive_matmul(values(a), bb, 6, 6, 7, 5, 4), {2, 3, 7, 4}), 1e-6));
  // An empty inner dimension gives zeros.
  EXPECT_TRUE(all_close(matmul(zeros({3, 0}), zeros({0, 4})), zeros({3, 4}), 0));
  const Tensor bt = rnd({2, 3, 4, 5}, 4, DType::f32);  // read through the transpose flag
  EXPECT_TRUE(all_close(matmul(a, transpose(bt, -1, -2)),
                        matmul(a, contiguous(transpose(bt, -1, -2))), 1e-6));
}

TEST(Matmul, TransposedViewsAreFlagsAndSharedMatricesFold) {
  const Tensor q = rnd({2, 3, 7, 5}, 5, DType::f32), k = rnd({2, 3, 7, 5}, 6, DType::f32);
  {
    LaunchLog log;
    const Tensor s = matmul(q, transpose(k, -1, -2));  // attention scores: no copy of k
    EXPECT_EQ(log.kernels(Phase::forward), (std::vector<std::string>{"gemm"}));
    EXPECT_EQ(log.launches()[0].grid.x, 6u);  // one strided-batched GEMM of 6 matrices
  }
  {
    LaunchLog log;
    matmul(q, rnd({5, 4}, 7, DType::f32));
    ASSERT_EQ(log.launches().back().grid.x, 1u);  // [6*7, 5] @ [5, 4] in one GEMM
    EXPECT_EQ(log.launches().back().flops, 2.0 * 42 * 5 * 4);
  }
}

TEST(Matmul, LinearMatchesNaiveAndBackwardIsTwoLaunches) {
  Tensor x = rnd({2, 3, 5}, 8, DType::f32).set_requires_grad(true);
  Tensor w = rnd({4, 5}, 9, DType::f32).set_requires_grad(true);
  Tensor b = rnd({4}, 10, DType::f32).set_requires_grad(true);
  const std::vector<double> xv = values(x), wv = values(w), bv = values(b);
  std::vector<double> ref;
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 4; ++o) {
      double s = bv[o];
      for (int i = 0; i < 5; ++i) s += xv[r * 5 + i] * wv[o * 5 + i];
      ref.push_back(s);
    }
  const Tensor y = linear(x, w, b);
  EXPECT_TRUE(all_close(y, from_vector(ref, {2, 3, 4}), 1e-6));
  LaunchLog log;
  backward(sum(y));
  // Within linear's node: dx and dW are GEMMs on transposed views, and the dW GEMM sums db as
  // it packs dy^T (on cpu; a cuBLASLt epilogue on emu and cuda).
  EXPECT_EQ(log.kernels_of_op("linear"), (std::vector<std::string>{"gemm", "gemm_bgrad_a"}));
  // With dy = 1: dx[r] = sum of W's rows, dW[o] = sum of x's rows, db = rows.
  std::vector<double> dx_ref, dw_ref(20, 0.0);
  for (int r = 0; r < 6; ++r)
    for (int i = 0; i < 5; ++i) {
      double s = 0;
      for (int o = 0; o < 4; ++o) s += wv[o * 5 + i];
      dx_ref.push_back(s);
      for (int o = 0; o < 4; ++o) dw_ref[o * 5 + i] += xv[r * 5 + i];
    }
  EXPECT_TRUE(all_close(x.grad(), from_vector(dx_ref, {2, 3, 5}), 1e-6));
  EXPECT_TRUE(all_close(w.grad(), from_vector(dw_ref, {4, 5}), 1e-6));
  EXPECT_TRUE(all_close(b.grad(), full({4}, 6.0), 1e-6));
}

TEST(Matmul, GradcheckMatmulAndLinear) {
  using V = const std::vector<Tensor>&;
  // Non-contiguous operands: transposed matrices, and batch dims permuted so that the batch
  // does not step by one stride (that operand is copied).
  const Tensor at = transpose(rnd({3, 2, 5, 4}, 11), -1, -2);                  // [3, 2, 4, 5]
  const Tensor permuted_batch = permute(rnd({5, 3, 2, 4}, 12), {2, 1, 0, 3});  // [2, 3, 5, 4]
  const GradCase cases[] = {
      {"2-D", {rnd({3, 4}, 13), rnd({4, 5}, 14)}, [](V x) { return matmul(x[0], x[1]); }},
      {"batched", {rnd({2, 3, 4}, 15), rnd({2, 4, 5}, 16)}, [](V x) { return matmul(x[0], x[1]); }},
      {"shared right",
       {rnd({2, 3, 4}, 17), rnd({4, 5}, 18)},
       [](V x) { return matmul(x[0], x[1]); }},
      {"shared left",
       {rnd({3, 4}, 19), rnd({2, 4, 5}, 20)},
       [](V x) { return matmul(x[0], x[1]); }},
      {"broadcast batch",
       {rnd({2, 1, 3, 4}, 21), rnd({3, 4, 5}, 22)},
       [](V x) { return matmul(x[0], x[1]); }},
      {"transposed views",
       {at, rnd({3, 2, 4, 5}, 23)},
       [](V x) { return matmul(x[0], transpose(x[1], -1, -2)); }},
      {"permuted batch",
       {rnd({2, 3, 4, 5}, 24), permuted_batch},
       [](V x) { return matmul(x[0], x[1]); }},
      {"linear",
       {rnd({2, 3, 5}, 25), rnd({4, 5}, 26), rnd({4}, 27)},
       [](V x) { return linear(x[0], x[1], x[2]); }},
      {"linear no bias, 1-D",
       {rnd({5}, 28), rnd({3, 5}, 29)},
       [](V x) { return linear(x[0], x[1]); }},
      {"linear non-contiguous x",
       {transpose(rnd({5, 4}, 30), 0, 1), rnd({3, 5}, 31), rnd({3}, 32)},
       [](V x) { return linear(x[0], x[1], x[2]); }},
      {"mlp",
       {rnd({2, 3, 5}, 33), rnd({9, 5}, 34), rnd({9}, 35), rnd({4, 9}, 36), rnd({4}, 37)},
       [](V x) { return mlp(x[0], x[1], x[2], x[3], x[4]); }},
      {"mlp without biases, non-contiguous x",
       {transpose(rnd({5, 4}, 38), 0, 1), rnd({8, 5}, 39), rnd({3, 8}, 40)},
       [](V x) { return mlp(x[0], x[1], Tensor(), x[2], Tensor()); }},
  };
  for (const GradCase& c : cases) EXPECT_TRUE(gradcheck_passes(c.f, c.inputs)) << c.name;
}

// The fused MLP against the same math written with the unfused ops (linear, gelu, linear):
// forward and every gradient, in f64 on cpu, where both run different code (the fused op goes
// through gemm_epilogue, the unfused one through gemm, gelu_forward and sum_dim separately).
TEST(Matmul, MlpEqualsLinearGeluLinear) {
  const auto make = [](uint64_t seed) {
    return std::vector<Tensor>{rnd({2, 7, 6}, seed), rnd({19, 6}, seed + 1), rnd({19}, seed + 2),
                               rnd({5, 19}, seed + 3), rnd({5}, seed + 4)};
  };
  std::vector<Tensor> fused = make(50), unfused = make(50);
  for (auto* v : {&fused, &unfused})
    for (Tensor& t : *v) t.set_requires_grad(true);
  const Tensor y = mlp(fused[0], fused[1], fused[2], fused[3], fused[4]);
  const Tensor y_ref =
      linear(gelu(linear(unfused[0], unfused[1], unfused[2])), unfused[3], unfused[4]);
  EXPECT_TRUE(all_close(y, y_ref, 1e-12));
  const Tensor r = rnd({2, 7, 5}, 60);
  backward(sum(y * r));
  backward(sum(y_ref * r));
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_TRUE(all_close(fused[i].grad(), unfused[i].grad(), 1e-12)) << "input " << i;
}

TEST(Matmul, ErrorsNameOpAndShapes) {
  std::string e = error_of([&] { matmul(zeros({2, 3}), zeros({4, 5})); });
  EXPECT_TRUE(contains_all(
      e, {"matmul: f32[2, 3] on cpu @ f32[4, 5] on cpu: expects [..., m, k] @ [..., k, n]"}));
  e = error_of([&] { matmul(zeros({3}), zeros({3, 2})); });
  EXPECT_TRUE(contains_all(e, {"matmul: f32[3] on cpu @"}));
  e = error_of([&] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); });
  EXPECT_TRUE(contains_all(e, {"matmul: shapes [2] and [3] do not broadcast"}));
  e = error_of([&] { matmul(zeros({2, 3}), zeros({3, 2}, DType::f64)); });
  EXPECT_TRUE(contains_all(e, {"of one dtype"}));
  e = error_of([&] { linear(zeros({2, 3}), zeros({4, 5})); });
  EXPECT_TRUE(
      contains_all(e, {"linear: input f32[2, 3] on cpu does not match weight f32[4, 5] on cpu"}));
  e = error_of([&] { linear(zeros({2, 5}), zeros({4, 5}), zeros({5})); });
  EXPECT_TRUE(contains_all(e, {"linear: bias f32[5] on cpu must be [4]"}));
  e = error_of([&] { mlp(zeros({2, 5}), zeros({8, 5}), Tensor(), zeros({3, 7}), Tensor()); });
  EXPECT_TRUE(contains_all(e, {"mlp: input f32[2, 5] on cpu, w_fc f32[8, 5] on cpu and w_proj "
                               "f32[3, 7] on cpu do not chain"}));
  e = error_of([&] { mlp(zeros({2, 5}), zeros({8, 5}), zeros({7}), zeros({3, 8}), Tensor()); });
  EXPECT_TRUE(contains_all(e, {"mlp: b_fc f32[7] on cpu must be [8]"}));
}

}  // namespace
}  // namespace glass
