// glass's own f32 GEMM (kernels/cpu/sgemm.cpp) against a plain triple loop in double: an
// independent reference that shares no code with it (no packing, no blocking, no vectors).
// The shapes straddle every edge of the blocking: the register tile (MR x NR), the k slab (KC),
// the row block (MC) and the column panel (NC), for all four transpose combinations. The edge
// tests run with slabs of 256 (ShallowSlabs); Sgemm.AtThisMachinesSlabDepth crosses the depth
// the machine chose (up to 1024, where the edge tests' shapes would cost three times as much).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/threads.h"

namespace {

using glass::kernels::cpu::set_sgemm_slab_depth;
using glass::kernels::cpu::sgemm;
using glass::kernels::cpu::sgemm_blocking;
using glass::kernels::cpu::SgemmOptions;

// fn() from inside a parallel loop of the cpu pool (two chunks, fn in the first), where sgemm
// must run on the calling thread.
template <class Fn>
void in_a_parallel_loop(Fn&& fn) {
  glass::kernels::cpu::parallel_chunks(2, [&](int64_t chunk) {
    EXPECT_TRUE(glass::kernels::cpu::in_parallel());
    if (chunk == 0) fn();
  });
}

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
// Only the entries `wanted` says are checked (all by default).
void expect_matches_reference(
    const Problem& p, const Operands& before, const std::vector<float>& c,
    const std::function<bool(int64_t, int64_t)>& wanted = [](int64_t, int64_t) { return true; }) {
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
      if (!wanted(i, j)) continue;
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
        o.ldc, {.bias = o.bias_or_null()});
  expect_matches_reference(p, o, c);
}

// Slabs of 256 k for one test, whatever the machine's depth.
struct ShallowSlabs {
  ShallowSlabs() { set_sgemm_slab_depth(256); }
  ~ShallowSlabs() { set_sgemm_slab_depth(0); }
  ShallowSlabs(const ShallowSlabs&) = delete;
  ShallowSlabs& operator=(const ShallowSlabs&) = delete;
};

TEST(Sgemm, MatchesATripleLoopAcrossEveryBlockingEdge) {
  const ShallowSlabs shallow;
  const auto blk = sgemm_blocking();
  // one partial tile, a whole tile and a partial one, several row blocks; the same for columns
  // (and two whole column panels); one k slab and two; k = 45 packs a transposed panel partly
  // through the register transposes (32 or 16 k at a time) and partly element by element. The
  // small ones read A (not transposed, m k <= 8192) and B (not transposed, whole panels,
  // k n <= 8192) where they are stored instead of packing them.
  const std::vector<int64_t> ms = {1, blk.mr + 1, blk.mc + 3};
  const std::vector<int64_t> ns = {blk.nr - 1, blk.nr + 1, 2 * blk.nr, 2 * blk.nr + 5};
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
  const ShallowSlabs shallow;
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
  const ShallowSlabs shallow;
  const auto blk = sgemm_blocking();
  for (const Problem& p :
       {Problem{false, true, 4 * blk.mc + 5, 40, 2 * blk.kc + 30},
        Problem{true, false, 4 * blk.mc + 1, blk.nc + 40, 20, 0, 1.0f, 0.0f, true},
        Problem{false, true, 100, 200, 270}, Problem{true, false, 20, 400, 260}}) {
    const Operands o = random_operands(p, 3);
    std::vector<float> one = o.c, two = o.c, nested = o.c;
    const int saved = glass::kernels::cpu::num_threads();
    glass::kernels::cpu::set_threads(1);
    sgemm(p.ta, p.tb, p.m, p.n, p.k, 1, o.a.data(), o.lda, o.b.data(), o.ldb, 0, one.data(), o.ldc,
          {.bias = o.bias_or_null()});
    glass::kernels::cpu::set_threads(2);
    sgemm(p.ta, p.tb, p.m, p.n, p.k, 1, o.a.data(), o.lda, o.b.data(), o.ldb, 0, two.data(), o.ldc,
          {.bias = o.bias_or_null()});
    in_a_parallel_loop([&] {
      sgemm(p.ta, p.tb, p.m, p.n, p.k, 1, o.a.data(), o.lda, o.b.data(), o.ldb, 0, nested.data(),
            o.ldc, {.bias = o.bias_or_null()});
    });
    glass::kernels::cpu::set_threads(saved);
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, nested);
    expect_matches_reference(p, o, one);
  }
}

// --- causal products (sgemm's `Causal`, used by kernels/cpu/flash_attention.cpp) ---

using glass::kernels::cpu::Causal;

// A causal problem: op(A) zero outside its band (kLowerA, kUpperA), or only C's lower part
// wanted (kLowerC), with diagonal d, computed with 1 or 2 threads or inside a parallel region.
struct CausalProblem {
  Problem p;
  Causal causal;
};

// Row i of the register tile that holds it: [first, last] (tiles start at multiples of MR in the
// whole of C, whatever share of it a thread takes), and the same for column j's NR-wide tile.
struct TileSpan {
  int64_t first, last;
};
TileSpan tile_of(int64_t index, int64_t width) {
  return {index / width * width, index / width * width + width - 1};
}

// op(A) with the band's zeros made explicit: 0 where each row's band excludes it, NaN where the
// band excludes it for every row of the row's register tile. A product that reads a NaN (did not
// skip what the band lets it skip) shows it; one that skips too much misses the reference.
void mask_a_outside_band(const CausalProblem& cp, Operands& o) {
  const Problem& p = cp.p;
  const int64_t mr = sgemm_blocking().mr, d = cp.causal.diagonal;
  const bool lower = cp.causal.kind == Causal::kLowerA;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t q = 0; q < p.k; ++q) {
      const TileSpan tile = tile_of(i, mr);
      const bool zero = lower ? q > i + d : q < i + d;
      const bool tile_zero = lower ? q > tile.last + d : q < tile.first + d;
      float& x = p.ta ? o.a[q * o.lda + i] : o.a[i * o.lda + q];
      if (zero) x = tile_zero ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
    }
}

// C = alpha op(A) op(B) + beta C with `options`, on `threads` OpenMP threads, or called from
// inside a parallel region of two (nested).
std::vector<float> run_product(const Problem& p, const Operands& o, const SgemmOptions& options,
                               int threads, bool nested) {
  std::vector<float> c = o.c;
  const int saved = glass::kernels::cpu::num_threads();
  glass::kernels::cpu::set_threads(nested ? 2 : threads);
  const auto product = [&] {
    sgemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, p.beta,
          c.data(), o.ldc, options);
  };
  if (nested) {
    in_a_parallel_loop(product);
  } else {
    product();
  }
  glass::kernels::cpu::set_threads(saved);
  return c;
}

void check_causal(const CausalProblem& cp) {
  const Problem& p = cp.p;
  Operands o = random_operands(p, static_cast<uint32_t>(p.m * 7 + p.n * 3 + p.k));
  const bool band_on_a = cp.causal.kind != Causal::kLowerC;
  constexpr float kSentinel = 12345.0f;  // C before the product, with beta = 0
  if (band_on_a) {
    mask_a_outside_band(cp, o);
  } else {
    std::fill(o.c.begin(), o.c.end(), kSentinel);
  }
  Operands zeroed = o;  // the reference's A: the NaNs were zeros
  for (float& x : zeroed.a)
    if (std::isnan(x)) x = 0;
  const int64_t mr = sgemm_blocking().mr, nr = sgemm_blocking().nr, d = cp.causal.diagonal;
  const std::vector<float> serial = run_product(p, o, {.causal = cp.causal}, 1, false);
  for (const auto& [threads, nested] : {std::pair{2, false}, std::pair{2, true}}) {
    const std::vector<float> c = run_product(p, o, {.causal = cp.causal}, threads, nested);
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        const float got = c[i * o.ldc + j];
        const bool wanted = band_on_a || j <= i + d;
        if (wanted) {
          ASSERT_FALSE(std::isnan(got)) << "C(" << i << ", " << j << ") read past A's band";
          ASSERT_EQ(got, serial[i * o.ldc + j]) << "C(" << i << ", " << j << ") with " << threads
                                                << " threads" << (nested ? ", nested" : "");
        } else if (tile_of(j, nr).first > tile_of(i, mr).last + d) {
          ASSERT_EQ(got, kSentinel) << "C(" << i << ", " << j << ") is in a tile above the "
                                    << "diagonal " << d << ": it should not be computed";
        }
      }
  }
  // the wanted entries against the triple loop, on A with its zeros
  expect_matches_reference(p, zeroed, serial,
                           [&](int64_t i, int64_t j) { return band_on_a || j <= i + d; });
}

// Every kind, with the diagonal below, on and above the first row, across register tiles, k slabs
// (a band that starts or stops inside a later slab) and both thread splits (a tall C by rows, a
// short one by columns: the diagonal moves with the share's corner).
TEST(Sgemm, CausalProductsSkipOnlyWhatTheBandAllows) {
  const ShallowSlabs shallow;
  const auto blk = sgemm_blocking();
  const int64_t tall = 4 * blk.mc + 5;  // split by rows with 2 threads
  for (Causal::Kind kind : {Causal::kLowerC, Causal::kLowerA, Causal::kUpperA})
    for (int64_t d : {int64_t{-20}, int64_t{0}, int64_t{37}}) {
      const Causal causal{kind, d};
      check_causal({{false, true, 2 * blk.mr + 3, 3 * blk.nr + 5, 45}, causal});
      check_causal({{false, false, 70, 2 * blk.nr + 1, blk.kc + 70}, causal});
      check_causal({{true, false, 70, 50, blk.kc + 70}, causal});
      check_causal({{false, true, tall, 40, 2 * blk.kc + 30}, causal});  // by rows
      check_causal({{true, false, 20, 400, 600}, causal});               // by columns
    }
}

// What flash attention asks on cpu: a query block of 64 rows starting at row 64 of a 128-token
// sequence, against keys [0, 128): scores (kLowerC), P V (kLowerA), P^T dO (kUpperA, -64).
TEST(Sgemm, CausalAttentionBlock) {
  check_causal({{false, true, 64, 128, 64}, {Causal::kLowerC, 64}});
  check_causal({{false, false, 64, 64, 128}, {Causal::kLowerA, 64}});
  check_causal({{true, false, 128, 64, 64}, {Causal::kUpperA, -64}});
}

// --- the row sums of op(A) (SgemmOptions::a_row_sums: a linear layer's bias gradient) ---

// The sums against a double loop over op(A), with 1, 2 threads and nested, and C still right:
// for a transposed A they are taken while its rows are packed (once, with the first column block,
// by whichever thread packs them), for one that is not in a pass of their own.
void check_row_sums(const Problem& p) {
  const Operands o = random_operands(p, static_cast<uint32_t>(p.m * 5 + p.n + p.k * 11));
  std::vector<double> want(p.m, 0.0), magnitude(p.m, 0.0);
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t q = 0; q < p.k; ++q) {
      const double x = p.ta ? o.a[q * o.lda + i] : o.a[i * o.lda + q];
      want[i] += x;
      magnitude[i] += std::abs(x);
    }
  const double eps = std::numeric_limits<float>::epsilon();
  std::vector<float> first, first_c;
  for (const auto& [threads, nested] :
       {std::pair{1, false}, std::pair{2, false}, std::pair{2, true}}) {
    std::vector<float> sums(p.m, std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> c = run_product(p, o, {.a_row_sums = sums.data()}, threads, nested);
    for (int64_t i = 0; i < p.m; ++i)
      ASSERT_NEAR(sums[i], want[i], eps * std::abs(want[i]) + 1e-12 * magnitude[i] + 1e-30)
          << "sum of row " << i << " of op(A) with " << threads << " threads"
          << (nested ? ", nested" : "") << ", " << (p.ta ? "T" : "N") << " m=" << p.m
          << " n=" << p.n << " k=" << p.k;
    if (first.empty()) first = sums;
    EXPECT_EQ(sums, first) << "the sums' bits depend on the threads";
    // C against the triple loop once (at -O0 it is most of this test's time), then bit for bit
    if (first_c.empty()) {
      first_c = c;
      expect_matches_reference(p, o, c);
    }
    EXPECT_EQ(c, first_c) << "C's bits depend on the threads";
  }
}

TEST(Sgemm, RowSumsOfA) {
  const ShallowSlabs shallow;
  const auto blk = sgemm_blocking();
  for (bool ta : {true, false}) {
    check_row_sums({ta, false, blk.mc + 3, 2 * blk.nr + 5, 2 * blk.kc + 9});  // row blocks, slabs
    check_row_sums({ta, true, 4 * blk.mc + 5, 40, blk.kc + 30});              // split by rows
    check_row_sums({ta, false, 300, 3 * blk.nr + 7, 700});                    // split by columns
    check_row_sums({ta, false, 300, 20, 1000});  // by columns, one panel: the first share is empty
    check_row_sums({ta, true, 19, blk.nc + blk.nr + 3, 33});  // two column blocks: summed once
    check_row_sums({ta, false, 20, 64, 45});                  // a small A read where it is stored
    check_row_sums({ta, false, 13, 35, 0});                   // k = 0: the sums are 0
    check_row_sums({ta, false, 13, 35, 21, 0, 0.0f, 1.0f});   // alpha = 0: A is still summed
  }
}

// The depth this machine's products use (sgemm.h): one slab and two, with bias, beta and the row
// sums of A, split by rows and by columns.
TEST(Sgemm, AtThisMachinesSlabDepth) {
  const auto blk = sgemm_blocking();
  EXPECT_GE(blk.kc, 256);
  check({false, true, blk.mr + 1, 2 * blk.nr + 5, blk.kc + 9, 1, 1.0f, 0.0f, true});
  check({true, false, blk.mc + 3, blk.nr + 1, 2 * blk.kc + 1, 0, 0.5f, 1.0f});
  check({false, false, 4 * blk.mc + 5, 40, blk.kc - 3});  // by rows
  check({true, true, 20, 400, blk.kc + 30});              // by columns
  check_row_sums({true, false, blk.mc + 3, 2 * blk.nr + 5, blk.kc + 9});
  check_row_sums({false, true, 4 * blk.mc + 5, 40, 2 * blk.kc + 1});
}

}  // namespace
