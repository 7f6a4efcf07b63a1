// glass's own f32 GEMM (kernels/cpu/sgemm.cpp) against a plain triple loop in double: an
// independent reference that shares no code with it (no packing, no blocking, no vectors).
// The shapes straddle every edge of the blocking: the register tile (MR x NR), the k slab (KC),
// the row block (MC) and the column panel (NC), for all four transpose combinations.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/sgemm.h"

namespace {

using glass::kernels::cpu::sgemm;
using glass::kernels::cpu::sgemm_blocking;

struct Problem {
  bool ta, tb;
  int64_t m, n, k;
  int64_t pad = 0;  // extra elements per stored row: leading dimensions above the row length
  float alpha = 1, beta = 0;
  bool with_bias = false;  // add bias[j] to column j
};

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c, bias;
  const float* bias_or_null() const { return bias.empty() ? nullptr : bias.data(); }
};

Operands random_operands(const Problem& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1, 1);
  Operands o;
  // stored: A is m x k (k x m transposed), B k x n (n x k), C m x n
  o.lda = (p.ta ? p.m : p.k) + p.pad;
  o.ldb = (p.tb ? p.k : p.n) + p.pad;
  o.ldc = p.n + p.pad;
  o.a.resize((p.ta ? p.k : p.m) * o.lda);
  o.b.resize((p.tb ? p.n : p.k) * o.ldb);
  o.c.resize(p.m * o.ldc);
  for (float& x : o.a) x = uniform(rng);
  for (float& x : o.b) x = uniform(rng);
  for (float& x : o.c) x = uniform(rng);
  if (p.with_bias) o.bias.resize(p.n);
  for (float& x : o.bias) x = uniform(rng);
  return o;
}

// alpha op(A) op(B) + beta C in double, and the bound on f32's rounding for each element:
// k products summed in f32 err by at most ~k eps of sum |a_ip b_pj|.
void expect_matches_reference(const Problem& p, const Operands& before,
                              const std::vector<float>& c) {
  const auto a_at = [&](int64_t i, int64_t q) {
    return double(p.ta ? before.a[q * before.lda + i] : before.a[i * before.lda + q]);
  };
  const auto b_at = [&](int64_t q, int64_t j) {
    return double(p.tb ? before.b[j * before.ldb + q] : before.b[q * before.ldb + j]);
  };
  const double eps = std::numeric_limits<float>::epsilon();
  int shown = 0;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        sum += a_at(i, q) * b_at(q, j);
        magnitude += std::abs(a_at(i, q) * b_at(q, j));
      }
      const double old_c = before.c[i * before.ldc + j];
      const double bias = before.bias.empty() ? 0.0 : before.bias[j];
      const double want = p.alpha * sum + (p.beta == 0 ? 0.0 : p.beta * old_c) + bias;
      const double tol =
          2 * (p.k + 3) * eps *
              (std::abs(p.alpha) * magnitude + std::abs(p.beta * old_c) + std::abs(bias)) +
          1e-30;
      const double got = c[i * before.ldc + j];
      if (std::abs(got - want) > tol && shown++ < 5)
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got << ", want " << want
                      << " (tolerance " << tol << ") for " << (p.ta ? "T" : "N")
                      << (p.tb ? "T" : "N") << " m=" << p.m << " n=" << p.n << " k=" << p.k;
    }
  // the padding past each row of C is not C's: it must be untouched
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = p.n; j < before.ldc; ++j)
      EXPECT_EQ(c[i * before.ldc + j], before.c[i * before.ldc + j]) << "wrote past row " << i;
}

void check(const Problem& p) {
  const Operands o = random_operands(p, static_cast<uint32_t>(p.m * 131 + p.n * 17 + p.k));
  std::vector<float> c = o.c;
  sgemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, p.beta, c.data(),
        o.ldc, o.bias_or_null());
  expect_matches_reference(p, o, c);
}

TEST(Sgemm, MatchesATripleLoopAcrossEveryBlockingEdge) {
  const auto blk = sgemm_blocking();
  // one partial tile, a whole tile and a partial one, several row blocks; the same for columns;
  // one k slab and two; k = 45 packs a transposed panel partly through the register transposes
  // (32 or 16 k at a time) and partly element by element
  const std::vector<int64_t> ms = {1, blk.mr + 1, blk.mc + 3};
  const std::vector<int64_t> ns = {blk.nr - 1, blk.nr + 1, 2 * blk.nr + 5};
  const std::vector<int64_t> ks = {7, 45, blk.kc + 9};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m : ms)
        for (int64_t n : ns)
          for (int64_t k : ks) check({ta, tb, m, n, k});
}

TEST(Sgemm, ColumnPanelsWiderThanNc) {
  const auto blk = sgemm_blocking();
  check({false, true, 19, blk.nc + blk.nr + 3, 33});
  check({true, false, 19, blk.nc + 1, 33});
}

TEST(Sgemm, AlphaBetaAndLeadingDimensions) {
  check({false, false, 29, 70, 300, 5, 0.5f, 0.0f});
  check({true, true, 29, 70, 300, 3, -2.0f, 1.0f});
  check({false, true, 50, 33, 17, 7, 1.0f, -0.75f});
  check({true, false, 50, 33, 0, 1, 1.0f, 0.5f});  // k = 0: C = beta C
}

// The bias is added once (with the first k slab), in whole tiles and at the edges, and by each
// thread to its own columns when the threads split C by columns.
TEST(Sgemm, BiasOnEveryRow) {
  const auto blk = sgemm_blocking();
  check({false, true, 2 * blk.mr + 3, 2 * blk.nr + 7, blk.kc + 5, 2, 1.0f, 0.0f, true});
  check({true, false, 9, 3 * blk.nr + 1, 2 * blk.kc + 1, 0, 0.5f, 1.0f, true});
  check({false, false, 12, 40, 0, 0, 1.0f, 0.0f, true});     // k = 0: C = bias
  check({false, false, 20, 450, 250, 0, 1.0f, 0.0f, true});  // split by columns
}

TEST(Sgemm, BetaZeroNeverReadsC) {
  const Problem p{false, false, 13, 35, 20};
  Operands o = random_operands(p, 7);
  for (float& x : o.c) x = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> c = o.c;
  sgemm(p.ta, p.tb, p.m, p.n, p.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f, c.data(),
        o.ldc);
  for (float x : c) ASSERT_FALSE(std::isnan(x)) << "beta = 0 read the NaN in C";
}

// Threads share C's row blocks (a tall C: several k slabs, and more columns than one B panel
// holds), or split its columns (a short C); every element still sums over k in the same order,
// so the bits do not depend on the thread count, nor on being called inside a parallel region.
TEST(Sgemm, SameBitsWhateverTheThreadCount) {
  const auto blk = sgemm_blocking();
  for (const Problem& p :
       {Problem{false, true, 4 * blk.mc + 5, 40, 2 * blk.kc + 30},
        Problem{true, false, 4 * blk.mc + 1, blk.nc + 40, 20, 0, 1.0f, 0.0f, true},
        Problem{false, true, 100, 200, 270}, Problem{true, false, 20, 400, 260}}) {
    const Operands o = random_operands(p, 3);
    std::vector<float> one = o.c, two = o.c, nested = o.c;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    sgemm(p.ta, p.tb, p.m, p.n, p.k, 1, o.a.data(), o.lda, o.b.data(), o.ldb, 0, one.data(), o.ldc,
          o.bias_or_null());
    omp_set_num_threads(2);
    sgemm(p.ta, p.tb, p.m, p.n, p.k, 1, o.a.data(), o.lda, o.b.data(), o.ldb, 0, two.data(), o.ldc,
          o.bias_or_null());
#pragma omp parallel num_threads(2)
#pragma omp single
    sgemm(p.ta, p.tb, p.m, p.n, p.k, 1, o.a.data(), o.lda, o.b.data(), o.ldb, 0, nested.data(),
          o.ldc, o.bias_or_null());
    omp_set_num_threads(saved);
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, nested);
    expect_matches_reference(p, o, one);
  }
}

}  // namespace
