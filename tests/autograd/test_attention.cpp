// causal_attention: the f32 kernels against naive loops in double, gradcheck in f64 (odd sizes and
// the transposed views a model passes in), f32 gradients against f64 ones, causality, results
// independent of the thread count, the launch record (FLOPs as documented), and the errors for bad
// shapes.
#include <cblas.h>
#include <omp.h>

#include <cmath>
#include <string>

#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::all_close;
using testing::values;

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// out[s, i] = sum_{j <= i} softmax_j(q_i . k_j / sqrt(D)) v_j for every (b, h) slice s, in double.
std::vector<double> naive_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const size_t S = static_cast<size_t>(q.size(0) * q.size(1)), T = static_cast<size_t>(q.size(2)),
               D = static_cast<size_t>(q.size(3));
  const std::vector<double> qv = values(q), kv = values(k), vv = values(v);
  std::vector<double> out(qv.size(), 0.0);
  for (size_t s = 0; s < S; ++s)
    for (size_t i = 0; i < T; ++i) {
      std::vector<double> p(i + 1);
      double m = -INFINITY, sum = 0;
      for (size_t j = 0; j <= i; ++j) {
        for (size_t d = 0; d < D; ++d) p[j] += qv[(s * T + i) * D + d] * kv[(s * T + j) * D + d];
        p[j] /= std::sqrt(static_cast<double>(D));
        m = std::max(m, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - m));
      for (size_t j = 0; j <= i; ++j)
        for (size_t d = 0; d < D; ++d)
          out[(s * T + i) * D + d] += p[j] / sum * vv[(s * T + j) * D + d];
    }
  return out;
}

TEST(Attention, ForwardF32MatchesNaive) {
  Generator gen(21);
  for (const Shape& shape : {Shape{2, 3, 5, 4}, Shape{1, 2, 33, 8}}) {
    const Tensor q = randn(shape, gen), k = randn(shape, gen), v = randn(shape, gen);
    EXPECT_TRUE(
        all_close(causal_attention(q, k, v), from_vector(naive_attention(q, k, v), shape), 1e-5))
        << shape_str(shape);
  }
}

TEST(Attention, Gradcheck) {
  Generator gen(22);
  auto f = [](const std::vector<Tensor>& in) { return causal_attention(in[0], in[1], in[2]); };
  auto input = [&] { return randn({2, 3, 5, 4}, gen, 0, 1, DType::f64); };
  const GradcheckResult r = gradcheck(f, {input(), input(), input()});
  EXPECT_TRUE(r.ok) << r.report;
  // [B, T, H, D] transposed to [B, H, T, D], as a model splits its heads: non-contiguous inputs
  auto heads = [&] { return transpose(randn({2, 5, 3, 4}, gen, 0, 1, DType::f64), 1, 2); };
  const GradcheckResult rt = gradcheck(f, {heads(), heads(), heads()});
  EXPECT_TRUE(rt.ok) << rt.report;
}

TEST(Attention, BackwardF32MatchesF64) {
  Generator gen(23);
  const Shape shape{2, 2, 17, 8};
  const Tensor q = randn(shape, gen), k = randn(shape, gen), v = randn(shape, gen);
  const Tensor dout = randn(shape, gen);
  auto grads = [&](DType dt) {
    std::vector<Tensor> in;
    for (const Tensor& t : {q, k, v}) in.push_back(cast(t, dt).set_requires_grad(true));
    backward(causal_attention(in[0], in[1], in[2]), cast(dout, dt));
    return std::vector<Tensor>{in[0].grad(), in[1].grad(), in[2].grad()};
  };
  const auto g32 = grads(DType::f32), g64 = grads(DType::f64);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(all_close(g32[i], g64[i], 1e-5)) << "input " << i;
}

TEST(Attention, IsCausalAndProbsAreMasked) {
  Generator gen(24);
  const int64_t T = 9, D = 4, cut = 4;
  const Tensor q = randn({1, 2, T, D}, gen), k = randn({1, 2, T, D}, gen);
  const Tensor v = randn({1, 2, T, D}, gen);
  // k and v changed at positions >= cut must not change the outputs before cut
  std::vector<float> k2 = to_vector<float>(k), v2 = to_vector<float>(v);
  for (size_t i = 0; i < k2.size(); ++i)
    if (static_cast<int64_t>(i / D) % T >= cut) k2[i] += 1, v2[i] -= 2;
  const std::vector<float> out1 = to_vector<float>(causal_attention(q, k, v));
  const std::vector<float> out2 = to_vector<float>(
      causal_attention(q, from_vector(k2, {1, 2, T, D}), from_vector(v2, {1, 2, T, D})));
  for (size_t i = 0; i < out1.size(); ++i) {
    if (static_cast<int64_t>(i / D) % T < cut) {
      EXPECT_EQ(out1[i], out2[i]) << "element " << i;
    } else {
      EXPECT_NE(out1[i], out2[i]) << "element " << i;
    }
  }
  // the saved probabilities: zero above the diagonal, rows summing to 1
  const Tensor out = empty_like(q), probs = Tensor::empty({1, 2, T, T});
  kernels::backend(q).attention_forward(q, k, v, out, probs, 0.5);
  const std::vector<float> p = to_vector<float>(probs);
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t i = 0; i < T; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < T; ++j) {
        const float pij = p[static_cast<size_t>((s * T + i) * T + j)];
        if (j > i) {
          EXPECT_EQ(pij, 0.0f) << "row " << i << " column " << j;
        }
        sum += pij;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << i;
    }
}

TEST(Attention, BitIdenticalForAnyThreadCount) {
  Generator gen(26);
  const Shape shape{2, 2, 16, 64};  // big enough to run the slices in parallel
  const Tensor q = randn(shape, gen), k = randn(shape, gen), v = randn(shape, gen);
  const Tensor dout = randn(shape, gen);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    Tensor qi = q.detach().set_requires_grad(true), ki = k.detach().set_requires_grad(true);
    Tensor vi = v.detach().set_requires_grad(true);
    const Tensor out = causal_attention(qi, ki, vi);
    backward(out, dout);
    return std::vector<std::vector<float>>{to_vector<float>(out), to_vector<float>(qi.grad()),
                                           to_vector<float>(ki.grad()),
                                           to_vector<float>(vi.grad())};
  };
  const int saved = omp_get_max_threads();
  const auto one = run(1), two = run(2);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
}

// Records the attention kernels' launches.
struct Recorder : LaunchObserver {
  std::vector<LaunchInfo> seen;
  void on_launch_begin(const LaunchInfo& info) override {
    if (std::string(info.kernel).rfind("attention_", 0) == 0) seen.push_back(info);
  }
};

TEST(Attention, LaunchesCountTheDocumentedFlopsAndLeaveBlasThreadsAlone) {
  Generator gen(25);
  const Shape shape{2, 3, 16, 8};
  const Tensor q = randn(shape, gen).set_requires_grad(true), k = randn(shape, gen);
  const Tensor v = randn(shape, gen);
  const int blas_threads = openblas_get_num_threads();
  Recorder rec;
  subscribe(&rec);
  backward(causal_attention(q, k, v), ones(shape));
  unsubscribe(&rec);
  EXPECT_EQ(openblas_get_num_threads(), blas_threads);
  ASSERT_EQ(rec.seen.size(), 2u);
  // full T x T x D GEMMs (2 forward, 4 backward) plus 5 or 4 FLOPs per causal entry, per slice
  const double square = 2.0 * 16 * 16 * 8, triangle = 16 * 17 / 2;
  EXPECT_STREQ(rec.seen[0].kernel, "attention_forward");
  EXPECT_STREQ(rec.seen[0].op, "attention");
  EXPECT_EQ(rec.seen[0].phase, Phase::forward);
  EXPECT_EQ(rec.seen[0].flops, 6 * (2 * square + 5 * triangle));
  EXPECT_STREQ(rec.seen[1].kernel, "attention_backward");
  EXPECT_EQ(rec.seen[1].phase, Phase::backward);
  EXPECT_EQ(rec.seen[1].flops, 6 * (4 * square + 4 * triangle));
}

TEST(Attention, RejectsBadShapes) {
  const Tensor q = zeros({2, 3, 5, 4});
  const std::string rank = error_of([&] { causal_attention(zeros({3, 5, 4}), q, q); });
  EXPECT_NE(rank.find("[B, H, T, D]"), std::string::npos) << rank;
  const std::string mismatch = error_of([&] { causal_attention(q, zeros({2, 3, 6, 4}), q); });
  EXPECT_NE(mismatch.find("f32[2, 3, 6, 4]"), std::string::npos) << mismatch;
  const std::string dtype = error_of([&] {
    causal_attention(q, q, zeros({2, 3, 5, 4}, DType::f64));
  });
  EXPECT_NE(dtype.find("f64[2, 3, 5, 4]"), std::string::npos) << dtype;
}

}  // namespace
}  // namespace glass
