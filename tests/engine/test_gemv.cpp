// The cpu GEMM's few-row path (kernels/cpu/gemv.cpp: C of 1..4 rows, B read where it is stored)
// against the blocked GEMM's own results for the same rows, and both against a triple loop in
// double. The GEMM's rows come from a product of 8 rows (more than kGemvMaxRows, so sgemm packs)
// whose first rows are the few-row product's A: the same inputs through the other path.
//
// Tolerance: each path sums k products in f32 in its own order (the GEMM: k ascending in slabs;
// the GEMV: two sets of 16 interleaved partial sums, even and odd 16-k blocks, folded by a tree,
// or k ascending), and a sum of k terms in f32 is within about k eps sum |a_p b_p| of the exact
// one whatever the order (plus the rounding of alpha, beta C and the bias). So each is checked
// against the double loop at 2 (k + 3) eps times the magnitudes (test_sgemm's bound) and the two
// paths against each other at twice that: they may differ by both errors, and no more. Bits are
// not expected to agree: the orders differ.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/rng.h"
#include "kernels/backend.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/threads.h"
#include "tests/testing.h"

namespace glass {
namespace {

using kernels::cpu::kGemvMaxRows;
using kernels::cpu::sgemm;
using kernels::cpu::sgemv_rows;

constexpr int64_t kGemmRows = 8;  // > kGemvMaxRows: sgemm's blocked path
static_assert(kGemmRows > kGemvMaxRows);

struct GemvCase {
  bool ta, tb;
  int64_t m, n, k;
  int64_t pad = 0;
  float alpha = 1, beta = 0;
  bool bias = false;
};

// Operands stored for kGemmRows rows of C (A: kGemmRows x k, or k x kGemmRows transposed); the
// few-row product reads the first m rows of the same storage.
struct Stored {
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c, bias;
};

Stored stored_operands(const GemvCase& p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1, 1);
  Stored s;
  s.lda = (p.ta ? kGemmRows : p.k) + p.pad;
  s.ldb = (p.tb ? p.k : p.n) + p.pad;
  s.ldc = p.n + p.pad;
  s.a.resize(static_cast<size_t>((p.ta ? p.k : kGemmRows) * s.lda));
  s.b.resize(static_cast<size_t>((p.tb ? p.n : p.k) * s.ldb));
  s.c.resize(static_cast<size_t>(kGemmRows * s.ldc));
  for (float& x : s.a) x = uniform(rng);
  for (float& x : s.b) x = uniform(rng);
  for (float& x : s.c) x = uniform(rng);
  if (p.bias) s.bias.resize(static_cast<size_t>(p.n));
  for (float& x : s.bias) x = uniform(rng);
  return s;
}

// C (a copy of the stored one) after product(c), run with `threads` threads of the cpu pool (or
// nested in one of its parallel loops: chunk 0 of two).
template <class Product>
std::vector<float> on_threads(const Stored& s, int threads, bool nested, Product product) {
  std::vector<float> c = s.c;
  const int saved = glass::kernels::cpu::num_threads();
  glass::kernels::cpu::set_threads(nested ? 2 : threads);
  if (nested) {
    glass::kernels::cpu::parallel_chunks(2, [&](int64_t chunk) {
      if (chunk == 0) product(c.data());
    });
  } else {
    product(c.data());
  }
  glass::kernels::cpu::set_threads(saved);
  return c;
}

// The few-row path on the first m rows (on_threads).
std::vector<float> few_rows(const GemvCase& p, const Stored& s, int threads, bool nested = false) {
  return on_threads(s, threads, nested, [&](float* c) {
    sgemv_rows(p.ta, p.tb, p.m, p.n, p.k, p.alpha, s.a.data(), s.lda, s.b.data(), s.ldb, p.beta, c,
               s.ldc, s.bias.empty() ? nullptr : s.bias.data());
  });
}

// gemv_c (the few-row path's C) and gemm_c (the blocked path's, on kGemmRows rows) against the
// double loop over the operands' values (value_a(i, q) of op(A), value_b(j, q) of op(B)), within
// 2 (k + 3) eps of the magnitudes each and 2x that of each other; C's other rows and its padding
// untouched by the few-row path.
template <class ValueA, class ValueB>
void expect_near_the_double_loop(const GemvCase& p, const Stored& s, ValueA value_a, ValueB value_b,
                                 const std::vector<float>& gemv_c,
                                 const std::vector<float>& gemm_c) {
  const double eps = std::numeric_limits<float>::epsilon();
  int shown = 0;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double sum = 0, magnitude = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        const double a = value_a(i, q), b = value_b(j, q);
        sum += a * b;
        magnitude += std::abs(a * b);
      }
      const double old_c = s.c[i * s.ldc + j], bias = s.bias.empty() ? 0.0 : s.bias[j];
      const double want = p.alpha * sum + (p.beta == 0 ? 0.0 : p.beta * old_c) + bias;
      const double tol =
          2 * (p.k + 3) * eps *
              (std::abs(p.alpha) * magnitude + std::abs(p.beta * old_c) + std::abs(bias)) +
          1e-30;
      const double gemv = gemv_c[i * s.ldc + j], gemm = gemm_c[i * s.ldc + j];
      if ((std::abs(gemv - want) > tol || std::abs(gemm - want) > tol ||
           std::abs(gemv - gemm) > 2 * tol) &&
          shown++ < 5)
        ADD_FAILURE() << "C(" << i << ", " << j << "): GEMV " << gemv << ", GEMM " << gemm
                      << ", double " << want << " (tolerance " << tol << ")";
    }
  // rows past m and the padding past each row are not the product's: untouched
  for (int64_t i = 0; i < kGemmRows; ++i)
    for (int64_t j = 0; j < s.ldc; ++j)
      if (i >= p.m || j >= p.n) {
        ASSERT_EQ(gemv_c[i * s.ldc + j], s.c[i * s.ldc + j]) << "wrote C(" << i << ", " << j << ")";
      }
}

void check_few_rows(const GemvCase& p) {
  SCOPED_TRACE(::testing::Message()
               << (p.ta ? "T" : "N") << (p.tb ? "T" : "N") << " m=" << p.m << " n=" << p.n
               << " k=" << p.k << " alpha=" << p.alpha << " beta=" << p.beta << " bias=" << p.bias);
  const Stored s = stored_operands(p, static_cast<uint32_t>(p.m * 7 + p.n * 131 + p.k));
  // the blocked GEMM on all kGemmRows rows
  std::vector<float> gemm_c = s.c;
  sgemm(p.ta, p.tb, kGemmRows, p.n, p.k, p.alpha, s.a.data(), s.lda, s.b.data(), s.ldb, p.beta,
        gemm_c.data(), s.ldc, {.bias = s.bias.empty() ? nullptr : s.bias.data()});
  const std::vector<float> gemv_c = few_rows(p, s, 1);
  // sgemm itself sends a few-row product here: the same bits through its entry point
  std::vector<float> via_sgemm = s.c;
  sgemm(p.ta, p.tb, p.m, p.n, p.k, p.alpha, s.a.data(), s.lda, s.b.data(), s.ldb, p.beta,
        via_sgemm.data(), s.ldc, {.bias = s.bias.empty() ? nullptr : s.bias.data()});
  EXPECT_EQ(via_sgemm, few_rows(p, s, glass::kernels::cpu::num_threads()));
  // the same bits whatever the thread count
  EXPECT_EQ(few_rows(p, s, 2), gemv_c);
  EXPECT_EQ(few_rows(p, s, 2, true), gemv_c);
  expect_near_the_double_loop(
      p, s, [&](int64_t r, int64_t q) { return p.ta ? s.a[q * s.lda + r] : s.a[r * s.lda + q]; },
      [&](int64_t c, int64_t q) { return p.tb ? s.b[c * s.ldb + q] : s.b[q * s.ldb + c]; }, gemv_c,
      gemm_c);
}

// Every transpose, 1..4 rows, column counts around the blocks (4 columns per dot product, 64 per
// streamed row: 63 is a partial block of each, 130 two whole ones and a tail), k around the
// 16-lane vectors and the pairs of them a row's two sets of sums take (a tail only, one whole
// vector, two and a tail, three and a tail), with padded leading dimensions.
TEST(Gemv, EqualsTheGemmForFewRowsAtEveryEdge) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m = 1; m <= kGemvMaxRows; ++m)
        for (int64_t n : {1, 5, 63, 130})
          for (int64_t k : {1, 16, 45, 61}) check_few_rows({ta, tb, m, n, k, (n + k) % 3});
}

// Alpha, beta (C read and scaled; beta = 0 never reads it) and the bias, which sgemm's epilogue
// adds as it writes C.
TEST(Gemv, AlphaBetaAndBias) {
  for (bool tb : {false, true}) {
    check_few_rows({false, tb, 1, 77, 45, 2, 0.5f, 0.0f, true});
    check_few_rows({false, tb, 1, 77, 45, 0, -2.0f, 1.0f, true});
    check_few_rows({true, tb, 3, 50, 19, 1, 1.0f, -0.75f, false});
    check_few_rows({false, tb, 2, 33, 300, 0, 1.0f, 0.5f, true});
  }
  for (bool tb : {false, true}) {
    const GemvCase p{false, tb, 2, 40, 20};
    Stored s = stored_operands(p, 5);
    for (float& x : s.c) x = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> c = few_rows(p, s, 1);
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j)
        ASSERT_FALSE(std::isnan(c[i * s.ldc + j])) << "beta = 0 read the NaN in C";
  }
}

// The shapes decoding a token multiplies (the default model: C = 256, and GPT-2's 768), B of 1 MB
// or more: big enough that two threads split the columns, each summing its own in the same order.
TEST(Gemv, DecodingShapesOnTwoThreads) {
  check_few_rows({false, true, 1, 1024, 256});                 // c_fc: x W^T
  check_few_rows({false, true, 1, 256, 1024, 0, 1, 0, true});  // mlp.c_proj with bias
  check_few_rows({false, true, 2, 3 * 768 + 5, 768});          // grouped query heads, odd columns
  check_few_rows({false, false, 1, 2100, 129});   // probs V over the cache, B not transposed
  check_few_rows({true, false, 1, 900, 300, 3});  // a transposed A, gathered first
}

// --- bf16 operands (sgemv_rows_bf16: vdpbf16ps) ---
//
// The same checks with A and B rounded to bf16 and an f32 C: the few-row path and sgemm_bf16's
// blocked path on kGemmRows rows against each other and the double loop over the rounded values
// (expect_near_the_double_loop). vdpbf16ps
// adds each product of two bf16 values (exact in f32) to an f32 sum with one rounding, as an FMA
// does, so the f32 bound holds (and the operands here are never subnormal, which the instruction
// would read as zero). Needs AVX512-BF16: without it sgemm_bf16 never takes this path.
std::vector<bf16> rounded(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = bf16::from_float(x[i]);
  return out;
}

void check_few_rows_bf16(const GemvCase& p) {
  SCOPED_TRACE(::testing::Message()
               << "bf16 " << (p.ta ? "T" : "N") << (p.tb ? "T" : "N") << " m=" << p.m
               << " n=" << p.n << " k=" << p.k << " alpha=" << p.alpha << " beta=" << p.beta);
  const Stored s = stored_operands(p, static_cast<uint32_t>(p.m * 11 + p.n * 17 + p.k));
  const std::vector<bf16> a = rounded(s.a), b = rounded(s.b);
  std::vector<float> gemm_c = s.c;
  kernels::cpu::sgemm_bf16(p.ta, p.tb, kGemmRows, p.n, p.k, p.alpha, a.data(), s.lda, b.data(),
                           s.ldb, p.beta, gemm_c.data(), s.ldc);
  const auto few = [&](int threads, bool nested) {
    return on_threads(s, threads, nested, [&](float* c) {
      kernels::cpu::sgemv_rows_bf16(p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), s.lda, b.data(),
                                    s.ldb, p.beta, c, s.ldc);
    });
  };
  const std::vector<float> gemv_c = few(1, false);
  // sgemm_bf16 sends a few-row product here; the same bits at any thread count
  std::vector<float> via_sgemm = s.c;
  kernels::cpu::sgemm_bf16(p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), s.lda, b.data(), s.ldb,
                           p.beta, via_sgemm.data(), s.ldc);
  EXPECT_EQ(via_sgemm, gemv_c);
  EXPECT_EQ(few(2, false), gemv_c);
  EXPECT_EQ(few(2, true), gemv_c);
  expect_near_the_double_loop(
      p, s,
      [&](int64_t r, int64_t q) { return (p.ta ? a[q * s.lda + r] : a[r * s.lda + q]).to_float(); },
      [&](int64_t c, int64_t q) { return (p.tb ? b[c * s.ldb + q] : b[q * s.ldb + c]).to_float(); },
      gemv_c, gemm_c);
}

// Every transpose, 1..4 rows, columns around the blocks (4 per dot product, 64 per streamed pair
// of rows), k around the 32 values of one instruction (a tail alone, one whole block, odd k whose
// last pair is half zero, two blocks and a tail), beta, and B of 1 MB or more (two threads split
// the columns).
TEST(Gemv, Bf16EqualsTheBf16GemmAtEveryEdge) {
  if (!kernels::cpu::cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512-BF16";
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t m = 1; m <= kGemvMaxRows; ++m)
        for (int64_t n : {1, 5, 63, 130})
          for (int64_t k : {1, 32, 45, 77}) check_few_rows_bf16({ta, tb, m, n, k, (n + k) % 3});
  check_few_rows_bf16({false, true, 1, 77, 45, 2, 0.5f, 1.0f});
  check_few_rows_bf16({true, false, 3, 50, 19, 1, -2.0f, -0.75f});
  check_few_rows_bf16({false, true, 1, 2048, 256});   // c_fc of the default model: 1 MB
  check_few_rows_bf16({false, false, 1, 4100, 129});  // probs V over a long cache
}

// --- through the dispatch table: the GEMM with its epilogues on a one-row C ---

const kernels::Backend& cpu_table = kernels::backend(kCPU);

Tensor gemv_random_tensor(const Shape& shape, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(philox_normal(seed, 0, i));
  return Tensor::from_host(v.data(), shape, DType::f32);
}
std::vector<float> host_values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  t.copy_to_host(v.data());
  return v;
}

// gemm_epilogue (gelu with its aux, the GELU gradient with the bias gradient of C's columns, and
// the row sums of A) on one row x against the same row inside an 8-row product: C, aux and the
// bias gradient to the tolerance above. y = x W^T + b as a Linear layer computes it.
TEST(Gemv, GemmEpiloguesOnOneRow) {
  const int64_t n = 70, k = 45, ld = kernels::gemm_aux_ld(n);
  const Tensor x8 = gemv_random_tensor({kGemmRows, k}, 1), w = gemv_random_tensor({n, k}, 2),
               b = gemv_random_tensor({n}, 3), pre8 = gemv_random_tensor({kGemmRows, ld}, 4);
  const Tensor x1 = Tensor::from_host(host_values(x8).data(), {1, k}, DType::f32);
  const Tensor pre1 = Tensor::from_host(host_values(pre8).data(), {1, ld}, DType::f32);
  const auto run = [&](int64_t m, const Tensor& x, const Tensor& pre, kernels::GemmActivation act,
                       kernels::GemmBiasGrad grad) {
    kernels::GemmArgs g;
    g.a = x;
    g.b = w;
    g.c = Tensor::empty({m, n}, DType::f32, kCPU);
    g.trans_b = true;
    g.m = m;
    g.n = n;
    g.k = k;
    g.lda = k;
    g.ldb = k;
    g.ldc = n;
    kernels::GemmEpilogue e;
    e.activation = act;
    e.bias_grad_of = grad;
    if (act == kernels::GemmActivation::gelu) {
      g.bias = b;
      e.aux = Tensor::empty({m, ld}, DType::f32, kCPU);
      e.aux_ld = ld;
    }
    if (act == kernels::GemmActivation::gelu_backward) {
      e.aux = pre;
      e.aux_ld = ld;
    }
    if (grad == kernels::GemmBiasGrad::columns_of_c)
      e.bias_grad = Tensor::empty({n}, DType::f32, kCPU);
    if (grad == kernels::GemmBiasGrad::rows_of_a)
      e.bias_grad = Tensor::empty({m}, DType::f32, kCPU);
    cpu_table.gemm_epilogue(g, e);
    std::vector<std::vector<float>> out = {host_values(g.c)};
    if (act == kernels::GemmActivation::gelu) out.push_back(host_values(e.aux));
    if (grad != kernels::GemmBiasGrad::none) out.push_back(host_values(e.bias_grad));
    return out;
  };
  const double eps = std::numeric_limits<float>::epsilon();
  // |x_p w_jp| summed over p, bounded by the sum of squares' square roots (Cauchy-Schwarz) times
  // a margin for GELU's slope (at most 1.13) and the bias: a loose, safe scale for the tolerance.
  double scale = 0;
  for (float v : host_values(x8)) scale = std::max<double>(scale, std::abs(v));
  for (float v : host_values(w)) scale = std::max<double>(scale, std::abs(v));
  const double tol = 4 * (k + 3) * eps * (k * scale * scale + 4);
  for (const auto& [act, grad] :
       {std::pair{kernels::GemmActivation::none, kernels::GemmBiasGrad::none},
        std::pair{kernels::GemmActivation::gelu, kernels::GemmBiasGrad::none},
        std::pair{kernels::GemmActivation::gelu_backward, kernels::GemmBiasGrad::none},
        std::pair{kernels::GemmActivation::gelu_backward, kernels::GemmBiasGrad::columns_of_c},
        std::pair{kernels::GemmActivation::none, kernels::GemmBiasGrad::rows_of_a}}) {
    const auto one = run(1, x1, pre1, act, grad);
    // the 8-row product's bias gradient of C's columns sums 8 rows: compare C and aux only there
    const auto eight = run(kGemmRows, x8, pre8, act, grad);
    const size_t outputs =
        grad == kernels::GemmBiasGrad::columns_of_c ? one.size() - 1 : one.size();
    for (size_t o = 0; o < outputs; ++o)
      for (size_t j = 0; j < one[o].size(); ++j) {
        const bool aux = act == kernels::GemmActivation::gelu && o == 1;
        if (aux && static_cast<int64_t>(j) >= n) continue;  // the aux row's padding: not written
        ASSERT_NEAR(one[o][j], eight[o][j], tol)
            << "output " << o << " element " << j << " activation " << static_cast<int>(act);
      }
    if (grad == kernels::GemmBiasGrad::columns_of_c) {  // one row: C's column sums are C itself
      for (int64_t j = 0; j < n; ++j) ASSERT_FLOAT_EQ(one.back()[j], one[0][j]);
    }
  }
}

}  // namespace
}  // namespace glass
