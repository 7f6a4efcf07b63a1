// The cpu device's bf16 GEMM entries (kernels/cpu/gemm_bf16.cpp; sgemm_bf16 in
// kernels/cpu/sgemm.cpp) against a triple loop in double over the same bf16 inputs: an independent
// reference sharing no code with them (no packing, no blocking, no f32 sums). Each result must be
// the exact one rounded once to bf16, give or take the f32 sums' error: |got - ref| <=
// 2^-8 |ref| (one bf16 rounding is at most 2^-9) + (k + 4) 2^-24 sum |terms| (f32 sums).
// Both paths run every case: the vdpbf16ps micro-kernel (on a CPU with AVX512-BF16) and the f32
// conversion path (forced). They sum in different orders, so they are compared with each other to
// f32 rounding, not bit for bit; each alone must give the same bits run to run and whatever the
// thread count. Where the CPU lacks AVX512-BF16 the fast-path tests skip, saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/sgemm_bf16_kernel.h"
#include "kernels/cpu/threads.h"
#include "tests/testing.h"

namespace glass::cpu_bf16_gemm_test {
namespace {

using kernels::GemmActivation;
using kernels::GemmArgs;
using kernels::GemmBiasGrad;
using kernels::GemmEpilogue;
using kernels::cpu::bf16_gemm_fast_path;
using kernels::cpu::cpu_has_avx512_bf16;
using kernels::cpu::set_bf16_gemm_fallback;
using kernels::cpu::set_sgemm_slab_depth;
using kernels::cpu::sgemm_bf16;

const kernels::Backend& cpu_backend() { return kernels::backend(kCPU); }

// n values uniform in [-1, 1), rounded to bf16.
std::vector<bf16> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<bf16> v(static_cast<size_t>(n));
  for (bf16& x : v) x = bf16::from_float(uniform(rng));
  return v;
}

Tensor bf16_tensor(const std::vector<bf16>& v) {
  return Tensor::from_host(v.data(), {static_cast<int64_t>(v.size())}, DType::bf16);
}

std::vector<double> values_of(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  const bf16* p = t.data<bf16>();
  for (size_t i = 0; i < out.size(); ++i) out[i] = p[i].to_float();
  return out;
}

// GELU (tanh approximation) and its derivative in double.
double gelu(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
double gelu_grad(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

// pre = alpha op(A) op(B) + beta C + bias in double, per element of C (batch x m x n, C's own
// layout), and the f32 error bound of each: (k + 4) 2^-24 times the sum of the terms' magnitudes.
struct Reference {
  std::vector<double> pre, f32_error;
};
Reference reference(const GemmArgs& g, const std::vector<double>& a, const std::vector<double>& b,
                    const std::vector<double>& c, const std::vector<double>& bias) {
  Reference r{c, std::vector<double>(c.size(), 0.0)};
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double s = 0, mag = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const double av =
              g.trans_a ? a[bi * g.stride_a + p * g.lda + i] : a[bi * g.stride_a + i * g.lda + p];
          const double bv =
              g.trans_b ? b[bi * g.stride_b + j * g.ldb + p] : b[bi * g.stride_b + p * g.ldb + j];
          s += av * bv;
          mag += std::abs(av * bv);
        }
        const size_t at = bi * g.stride_c + i * g.ldc + j;
        const double old = g.beta == 0 ? 0 : g.beta * c[at], add = bias.empty() ? 0 : bias[j];
        r.pre[at] = g.alpha * s + old + add;
        r.f32_error[at] =
            (g.k + 4) * std::ldexp(std::abs(g.alpha) * mag + std::abs(old) + std::abs(add), -24);
      }
  return r;
}

bool within_bf16(double got, double want, double f32_error) {
  return std::abs(got - want) <= std::ldexp(std::abs(want), -8) + f32_error + 1e-30;
}

// One GEMM's arguments with bf16 operands filled at random: leading dimensions padded, `batch`
// matrices, C's old values NaN when beta == 0 (they must not be read).
struct Case {
  bool ta, tb;
  int64_t m, n, k, batch = 1;
  int64_t pad = 0;
  double alpha = 1, beta = 0;
  bool bias = false;
};
struct Built {
  GemmArgs g;
  std::vector<double> a, b, c, bias;
};
Built build(const Case& cs, uint32_t seed) {
  Built o;
  GemmArgs& g = o.g;
  g.trans_a = cs.ta, g.trans_b = cs.tb;
  g.m = cs.m, g.n = cs.n, g.k = cs.k, g.batch = cs.batch;
  g.lda = std::max<int64_t>(1, cs.ta ? cs.m : cs.k) + cs.pad;  // at least 1, also for k = 0
  g.ldb = std::max<int64_t>(1, cs.tb ? cs.k : cs.n) + cs.pad;
  g.ldc = cs.n + cs.pad;
  g.stride_a = (cs.ta ? cs.k : cs.m) * g.lda;
  g.stride_b = (cs.tb ? cs.n : cs.k) * g.ldb;
  g.stride_c = cs.m * g.ldc;
  g.alpha = cs.alpha, g.beta = cs.beta;
  std::vector<bf16> c = random_bf16(cs.batch * g.stride_c, seed + 2);
  if (cs.beta == 0)
    for (bf16& x : c) x.bits = 0x7fc0;  // NaN
  g.a = bf16_tensor(random_bf16(cs.batch * g.stride_a, seed));
  g.b = bf16_tensor(random_bf16(cs.batch * g.stride_b, seed + 1));
  g.c = bf16_tensor(c);
  if (cs.bias) g.bias = bf16_tensor(random_bf16(cs.n, seed + 3));
  o.a = values_of(g.a), o.b = values_of(g.b), o.c = values_of(g.c);
  if (cs.bias) o.bias = values_of(g.bias);
  return o;
}

std::string describe(const Case& cs, bool fallback) {
  return "ta=" + std::to_string(cs.ta) + " tb=" + std::to_string(cs.tb) +
         " m=" + std::to_string(cs.m) + " n=" + std::to_string(cs.n) +
         " k=" + std::to_string(cs.k) + " batch=" + std::to_string(cs.batch) +
         " pad=" + std::to_string(cs.pad) + " beta=" + std::to_string(cs.beta) +
         " bias=" + std::to_string(cs.bias) +
         (fallback ? " (f32 conversion path)" : " (fastest path on this CPU)");
}

// Runs fn once per path: the conversion path forced, then the fastest the CPU has (the same path
// again on a CPU without AVX512-BF16).
template <class Fn>
void on_both_paths(Fn&& fn) {
  for (const bool fallback : {true, false}) {
    set_bf16_gemm_fallback(fallback);
    fn(fallback);
  }
  set_bf16_gemm_fallback(false);
}

// The shapes: the register tile (8 x 32) and its tails, odd k, k across slabs (depth 256 here,
// with a slab of one k at the end), a C wide enough to be split over threads, and k = 0 (C =
// beta C + bias).
const Case kShapes[] = {
    {false, false, 1, 1, 1},     {false, false, 3, 5, 7},     {false, false, 9, 33, 17},
    {false, false, 17, 65, 64},  {false, false, 40, 70, 129}, {false, false, 20, 40, 513},
    {false, false, 100, 96, 96}, {false, false, 5, 7, 0},
};

TEST(CpuBf16Gemm, GemmEntryMatchesDoubleReferenceForEveryTransposeAndEdge) {
  set_sgemm_slab_depth(256);
  uint32_t seed = 100;
  for (Case cs : kShapes)
    for (int flags = 0; flags < 16; ++flags) {
      cs.ta = flags & 1, cs.tb = flags & 2;
      cs.pad = (flags & 4) ? 3 : 0;
      cs.bias = flags & 8;
      cs.batch = (flags & 4) ? 2 : 1;
      cs.alpha = (flags & 4) ? 0.5 : 1;
      cs.beta = (flags & 8) ? 0 : 0.25;
      seed += 10;
      on_both_paths([&](bool fallback) {
        Built o = build(cs, seed);
        const Reference ref = reference(o.g, o.a, o.b, o.c, o.bias);
        cpu_backend().gemm(o.g);
        const std::vector<double> got = values_of(o.g.c);
        int bad = 0;
        for (int64_t bi = 0; bi < cs.batch; ++bi)
          for (int64_t i = 0; i < cs.m; ++i)
            for (int64_t j = 0; j < cs.n; ++j) {
              const size_t at = bi * o.g.stride_c + i * o.g.ldc + j;
              if (!within_bf16(got[at], ref.pre[at], ref.f32_error[at]) && bad++ < 3)
                ADD_FAILURE() << describe(cs, fallback) << ": C[" << bi << "][" << i << "][" << j
                              << "] = " << got[at] << ", reference " << ref.pre[at];
            }
        // the padding between C's rows is not written (it holds NaN when beta == 0)
        for (int64_t i = 0; i < cs.batch * cs.m; ++i)
          for (int64_t j = cs.n; j < o.g.ldc; ++j)
            EXPECT_TRUE(cs.beta != 0 || std::isnan(got[i * o.g.ldc + j])) << describe(cs, fallback);
      });
    }
  set_sgemm_slab_depth(0);
}

// The epilogues the bf16 training step uses, through the gemm_epilogue entry: bias + GELU with the
// pre-activation kept in aux, dGELU with the bias gradient of C's columns, and the bias gradient
// of op(A)'s rows. GELU is applied to the f32 pre-activation (not to its bf16 rounding), and
// dGELU multiplies the f32 product by gelu'(aux). beta 0 (aux rounded in the product's tiles, the
// bf16 aux read as it is) and beta 0.5 (the generic f32 passes after the product).
TEST(CpuBf16Gemm, EpiloguesMatchDoubleReference) {
  struct Shape {
    int64_t m, n, k;
  };
  for (const Shape s : {Shape{13, 21, 37}, Shape{70, 40, 130}, Shape{9, 64, 8}})
    for (int flags = 0; flags < 8; ++flags)
      for (const GemmActivation act :
           {GemmActivation::gelu, GemmActivation::gelu_backward, GemmActivation::none})
        on_both_paths([&](bool fallback) {
          Case cs{bool(flags & 1), bool(flags & 2), s.m, s.n, s.k};
          cs.bias = act == GemmActivation::gelu;
          cs.beta = (flags & 4) ? 0.5 : 0;
          Built o = build(cs, 500 + flags);
          GemmEpilogue e;
          e.activation = act;
          e.aux_ld = act == GemmActivation::none ? 0 : kernels::gemm_aux_ld(s.n);
          std::vector<double> aux_in;
          if (act != GemmActivation::none) {
            e.aux = bf16_tensor(random_bf16(s.m * e.aux_ld, 600 + flags));
            aux_in = values_of(e.aux);
          }
          if (act == GemmActivation::gelu_backward) e.bias_grad_of = GemmBiasGrad::columns_of_c;
          if (act == GemmActivation::none) e.bias_grad_of = GemmBiasGrad::rows_of_a;
          if (e.bias_grad_of != GemmBiasGrad::none)
            e.bias_grad = bf16_tensor(std::vector<bf16>(
                e.bias_grad_of == GemmBiasGrad::rows_of_a ? s.m : s.n, bf16::from_float(0)));
          const Reference ref = reference(o.g, o.a, o.b, o.c, o.bias);
          cpu_backend().gemm_epilogue(o.g, e);
          const std::vector<double> c = values_of(o.g.c),
                                    bias_grad = e.bias_grad.defined() ? values_of(e.bias_grad)
                                                                      : std::vector<double>(),
                                    aux_out =
                                        e.aux.defined() ? values_of(e.aux) : std::vector<double>();
          const std::string what =
              describe(cs, fallback) + " epilogue " + kernels::gemm_epilogue_name(e);
          std::vector<double> column_sum(s.n, 0.0), column_error(s.n, 0.0);
          int bad = 0;
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) {
              const size_t at = i * s.n + j;
              const double pre = ref.pre[at];
              // f32 arithmetic in the epilogue: a few ulps of the pre-activation
              const double err = 1.2 * ref.f32_error[at] + std::ldexp(std::abs(pre), -20);
              double want = pre;
              if (act == GemmActivation::gelu) want = gelu(pre);
              if (act == GemmActivation::gelu_backward)
                want = pre * gelu_grad(aux_in[i * e.aux_ld + j]);
              column_sum[j] += want;
              column_error[j] += err;
              if (!within_bf16(c[at], want, err) && bad++ < 3)
                ADD_FAILURE() << what << ": C[" << i << "][" << j << "] = " << c[at]
                              << ", reference " << want << " (pre " << pre << ")";
              if (act == GemmActivation::gelu) {
                const double aux = aux_out[i * e.aux_ld + j];
                if (!within_bf16(aux, pre, ref.f32_error[at]) && bad++ < 3)
                  ADD_FAILURE() << what << ": aux[" << i << "][" << j << "] = " << aux
                                << ", reference " << pre;
              }
            }
          if (e.bias_grad_of == GemmBiasGrad::columns_of_c) {
            for (int64_t j = 0; j < s.n; ++j)
              EXPECT_TRUE(within_bf16(bias_grad[j], column_sum[j], column_error[j]))
                  << what << ": bias_grad[" << j << "] = " << bias_grad[j] << ", reference "
                  << column_sum[j];
          }
          if (e.bias_grad_of == GemmBiasGrad::rows_of_a)
            for (int64_t i = 0; i < s.m; ++i) {
              double want = 0;
              for (int64_t p = 0; p < s.k; ++p)
                want += cs.ta ? o.a[p * o.g.lda + i] : o.a[i * o.g.lda + p];
              EXPECT_TRUE(within_bf16(bias_grad[i], want, 1e-6))
                  << what << ": bias_grad[" << i << "] = " << bias_grad[i] << ", reference "
                  << want;
            }
        });
}

// Rounded once: with small integers for A, B, C and the bias, every product and sum is exact in
// f32, so pre = alpha A B + beta C + bias is known exactly, in any summation order, and C must be
// bf16(pre) to the bit on both paths. pre reaches thousands (12 significant bits), so rounding the
// product to bf16 before adding beta C and the bias (a second rounding) would differ here.
TEST(CpuBf16Gemm, ExactProductsAreRoundedToBf16OnceAfterBetaAndBias) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> small(-15, 15);
  const auto integers = [&](int64_t n) {
    std::vector<bf16> v(static_cast<size_t>(n));
    for (bf16& x : v) x = bf16::from_float(static_cast<float>(small(rng)));
    return v;
  };
  // (beta and bias as set below, for the messages)
  for (const Case& shape : {Case{false, true, 37, 70, 65, 1, 0, 4, 0.5, true},
                            Case{true, false, 8, 33, 300, 1, 0, 4, 0.5, true}})
    on_both_paths([&](bool fallback) {
      set_sgemm_slab_depth(256);  // k = 300 crosses a slab edge
      GemmArgs g;
      g.trans_a = shape.ta, g.trans_b = shape.tb;
      g.m = shape.m, g.n = shape.n, g.k = shape.k;
      g.lda = shape.ta ? shape.m : shape.k, g.ldb = shape.tb ? shape.k : shape.n, g.ldc = shape.n;
      g.alpha = 4, g.beta = 0.5;
      const std::vector<bf16> a = integers(shape.m * shape.k), b = integers(shape.k * shape.n),
                              c = integers(shape.m * shape.n), bias = integers(shape.n);
      g.a = bf16_tensor(a), g.b = bf16_tensor(b), g.c = bf16_tensor(c), g.bias = bf16_tensor(bias);
      cpu_backend().gemm(g);
      const bf16* got = g.c.data<bf16>();
      int bad = 0;
      for (int64_t i = 0; i < shape.m; ++i)
        for (int64_t j = 0; j < shape.n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < shape.k; ++p)
            sum += double(a[shape.ta ? p * shape.m + i : i * shape.k + p].to_float()) *
                   b[shape.tb ? j * shape.k + p : p * shape.n + j].to_float();
          const double pre = 4 * sum + 0.5 * c[i * shape.n + j].to_float() + bias[j].to_float();
          const bf16 want = bf16::from_float(static_cast<float>(pre));  // pre is exact in f32
          if (got[i * shape.n + j].bits != want.bits && bad++ < 3)
            ADD_FAILURE() << describe(shape, fallback) << ": C[" << i << "][" << j
                          << "] = " << got[i * shape.n + j].to_float() << ", want "
                          << want.to_float() << " = bf16(" << pre << ")";
        }
      set_sgemm_slab_depth(0);
    });
}

// sgemm_bf16's f32 output on both paths, for one product; c starts as `c0`.
struct Product {
  bool ta, tb;
  int64_t m, n, k;
  float alpha = 1, beta = 0;
};
std::vector<float> run_sgemm_bf16(const Product& p, const std::vector<bf16>& a,
                                  const std::vector<bf16>& b, std::vector<float> c,
                                  std::vector<float>* row_sums = nullptr) {
  if (row_sums) row_sums->assign(p.m, 0.0f);
  sgemm_bf16(p.ta, p.tb, p.m, p.n, p.k, p.alpha, a.data(), p.ta ? p.m : p.k, b.data(),
             p.tb ? p.k : p.n, p.beta, c.data(), p.n,
             {.a_row_sums = row_sums ? row_sums->data() : nullptr});
  return c;
}

// The fast path against the conversion path: the same sums in different orders (vdpbf16ps adds
// two products per lane per instruction, the f32 GEMM one FMA at a time), so they differ by f32
// rounding only: at most (k + 4) 2^-24 sum |terms| each, twice that between the two.
TEST(CpuBf16Gemm, FastPathAgreesWithConversionPathToF32Rounding) {
  if (!cpu_has_avx512_bf16())
    GTEST_SKIP() << "this CPU lacks AVX512-BF16: only the f32 conversion path exists here";
  set_sgemm_slab_depth(256);
  const Product products[] = {{false, false, 37, 70, 301, 0.5f, 0.75f},
                              {true, false, 64, 33, 257},
                              {false, true, 9, 96, 15, 2.0f, -1.0f},
                              {true, true, 100, 40, 64}};
  uint32_t seed = 900;
  for (const Product& p : products) {
    const std::vector<bf16> a = random_bf16(p.m * p.k, seed++), b = random_bf16(p.k * p.n, seed++);
    std::vector<float> c0(p.m * p.n);
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = random_bf16(1, seed + i)[0].to_float();
    std::vector<float> sums_fast, sums_slow;
    set_bf16_gemm_fallback(true);
    const std::vector<float> slow = run_sgemm_bf16(p, a, b, c0, &sums_slow);
    set_bf16_gemm_fallback(false);
    ASSERT_TRUE(bf16_gemm_fast_path());
    const std::vector<float> fast = run_sgemm_bf16(p, a, b, c0, &sums_fast);
    for (int64_t i = 0; i < p.m; ++i) {
      EXPECT_EQ(sums_fast[i], sums_slow[i]) << "row sums are exact double sums on both paths";
      for (int64_t j = 0; j < p.n; ++j) {
        double mag = std::abs(p.beta * c0[i * p.n + j]);
        for (int64_t q = 0; q < p.k; ++q)
          mag += std::abs(p.alpha * a[p.ta ? q * p.m + i : i * p.k + q].to_float() *
                          b[p.tb ? j * p.k + q : q * p.n + j].to_float());
        const double bound = 2 * (p.k + 4) * std::ldexp(mag, -24);
        ASSERT_LE(std::abs(double(fast[i * p.n + j]) - slow[i * p.n + j]), bound)
            << "ta=" << p.ta << " tb=" << p.tb << " m=" << p.m << " n=" << p.n << " k=" << p.k
            << " at (" << i << ", " << j << ")";
      }
    }
  }
  set_sgemm_slab_depth(0);
}

// Same inputs, same bits: run to run, and with 1 or 2 threads (a C split by rows, and a short C
// split by columns), on each path.
TEST(CpuBf16Gemm, SameBitsRunToRunAndWhateverTheThreadCount) {
  const Product products[] = {{false, true, 256, 160, 96}, {true, false, 24, 640, 200}};
  uint32_t seed = 1300;
  for (const bool fallback : {true, false}) {
    if (!fallback && !cpu_has_avx512_bf16())
      GTEST_SKIP() << "this CPU lacks AVX512-BF16: the fast path's determinism is not tested "
                      "(the conversion path's was)";
    set_bf16_gemm_fallback(fallback);
    for (const Product& p : products) {
      const std::vector<bf16> a = random_bf16(p.m * p.k, seed++),
                              b = random_bf16(p.k * p.n, seed++);
      const std::vector<float> c0(p.m * p.n, 0.0f);
      const auto run = [&](int threads) {
        return testing::with_threads(threads, [&] { return run_sgemm_bf16(p, a, b, c0); });
      };
      const std::vector<float> one = run(1), two = run(2), again = run(2);
      EXPECT_EQ(one, two) << (fallback ? "conversion" : "fast") << " path, m=" << p.m;
      EXPECT_EQ(two, again) << (fallback ? "conversion" : "fast") << " path, m=" << p.m;
    }
  }
  set_bf16_gemm_fallback(false);
}

// Products split over threads (by rows at 2 threads, m >= 384; by columns at 3, m < 576), each
// share packing its own operands or reading a row-major A where it is stored (an even row stride:
// its k pairs are 32-bit words there), against one thread: the f32 C, the rounded bf16 C with its
// bias and the row sums must be the same bits, and the row sums the exact double sums (an
// independent reference). Slabs of 64 and 256 with an odd last one; odd and even row strides;
// tails of tiles.
TEST(CpuBf16Gemm, SplitProductsGiveTheBitsOfOneThread) {
  if (!cpu_has_avx512_bf16())
    GTEST_SKIP() << "this CPU lacks AVX512-BF16: the split fast path is not tested";
  struct Shape {
    bool ta, tb;
    int64_t m, n, k, pad;
  };
  const Shape shapes[] = {{false, true, 400, 70, 131, 0},  {false, true, 400, 70, 131, 1},
                          {true, false, 400, 96, 131, 1},  {false, false, 392, 40, 200, 0},
                          {true, true, 24, 640, 200, 0},   {true, false, 100, 300, 257, 2},
                          {false, false, 392, 40, 301, 0}, {true, false, 400, 72, 301, 1}};
  uint32_t seed = 2100;
  for (const int64_t slab : {64, 256})
    for (const Shape& s : shapes) {
      set_sgemm_slab_depth(slab);
      const int64_t lda = (s.ta ? s.m : s.k) + s.pad, ldb = (s.tb ? s.k : s.n) + s.pad;
      const std::vector<bf16> a = random_bf16((s.ta ? s.k : s.m) * lda, seed++),
                              b = random_bf16((s.tb ? s.n : s.k) * ldb, seed++);
      std::vector<float> bias(s.n);
      for (size_t j = 0; j < bias.size(); ++j) bias[j] = random_bf16(1, seed + j)[0].to_float();
      struct Result {
        std::vector<float> c, sums;
        std::vector<uint16_t> rounded;
      };
      const auto run = [&](int threads) {
        return testing::with_threads(threads, [&] {
          Result r{std::vector<float>(s.m * s.n), std::vector<float>(s.m), {}};
          sgemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                     r.c.data(), s.n, {.a_row_sums = r.sums.data()});
          std::vector<bf16> rounded(s.m * s.n);
          std::vector<float> scratch(s.m * s.n);
          sgemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                     scratch.data(), s.n, {},
                     {.rounded = rounded.data(), .ld = s.n, .bias = bias.data()});
          for (const bf16& x : rounded) r.rounded.push_back(x.bits);
          return r;
        });
      };
      const std::string what = "ta=" + std::to_string(s.ta) + " tb=" + std::to_string(s.tb) +
                               " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                               " k=" + std::to_string(s.k) + " pad=" + std::to_string(s.pad) +
                               " slab=" + std::to_string(slab);
      const Result one = run(1);
      for (int64_t i = 0; i < s.m; ++i) {
        double want = 0;
        for (int64_t p = 0; p < s.k; ++p) want += a[s.ta ? p * lda + i : i * lda + p].to_float();
        ASSERT_EQ(one.sums[i], static_cast<float>(want)) << what << ": row sum " << i;
      }
      for (const int threads : {2, 3}) {
        const Result split = run(threads);
        EXPECT_EQ(0, std::memcmp(split.c.data(), one.c.data(), one.c.size() * sizeof(float)))
            << what << ", " << threads << " threads: f32 C";
        EXPECT_EQ(split.rounded, one.rounded) << what << ", " << threads << " threads: bf16 C";
        EXPECT_EQ(0, std::memcmp(split.sums.data(), one.sums.data(), one.sums.size() * 4))
            << what << ", " << threads << " threads: row sums";
      }
    }
  set_sgemm_slab_depth(0);
}

// sgemm_bf16's Bf16Store against the f32 C of the same product (the same sums) finished by hand:
// with a destination, exactly bf16::from_float(C + bias[j]); without one, C + bias[j] in f32. The
// store's rounding (integer AVX-512 on the fast path), its masks on partial tiles and its offsets
// for threads' shares are what is checked, on tiles' tails, odd and even row strides (the pair
// packing of odd strides and the 32-bit word packing of even ones), k across slabs, integer
// values whose sums round at ties, and Inf and NaN. With gelu, aux (`rounded`) as above and
// bf16(gelu(value)) into a destination of its own row stride.
TEST(CpuBf16Gemm, StoreRoundsTheF32ResultOnceAfterTheBias) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-40, 40);
  struct Shape {
    int64_t m, n, k, pad;
  };
  const Shape shapes[] = {{1, 1, 1, 0},  {3, 5, 7, 1},     {9, 33, 17, 0},   {17, 65, 64, 1},
                          {8, 32, 2, 0}, {40, 70, 129, 0}, {31, 47, 200, 3}, {130, 96, 66, 2}};
  for (const bool fallback : {true, false}) {
    set_bf16_gemm_fallback(fallback);
    set_sgemm_slab_depth(64);
    for (const Shape& s : shapes)
      for (const bool ta : {false, true})
        for (const bool tb : {false, true}) {
          const int64_t lda = (ta ? s.m : s.k) + s.pad, ldb = (tb ? s.k : s.n) + s.pad,
                        ldc = s.n + s.pad;
          std::vector<bf16> a((ta ? s.k : s.m) * lda), b((tb ? s.n : s.k) * ldb);
          for (bf16& x : a) x = bf16::from_float(static_cast<float>(small(rng)) * 3.0f);
          for (bf16& x : b) x = bf16::from_float(static_cast<float>(small(rng)) * 5.0f);
          if (s.m > 2 && s.k > 1) {  // row 1 of C NaN, row 2 infinite
            a[ta ? lda + 1 : lda] = bf16::from_float(std::numeric_limits<float>::quiet_NaN());
            for (int64_t p = 0; p < s.k; ++p)
              a[ta ? p * lda + 2 : 2 * lda + p] = bf16::from_float(0);
            a[ta ? 2 : 2 * lda] = bf16::from_float(std::numeric_limits<float>::infinity());
            for (int64_t j = 0; j < s.n; ++j) b[tb ? j * ldb : j] = bf16::from_float(1);
          }
          std::vector<float> bias(s.n);
          for (float& x : bias) x = static_cast<float>(small(rng)) * 0.5f;
          const auto product = [&](const kernels::cpu::Bf16Store& store) {
            std::vector<float> c(s.m * ldc, 0.0f);
            testing::with_threads(2, [&] {
              sgemm_bf16(ta, tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(),
                         ldc, {}, store);
              return 0;
            });
            return c;
          };
          const std::vector<float> plain = product({});
          std::vector<bf16> rounded(s.m * ldc, bf16::from_float(-7.0f));
          product({.rounded = rounded.data(), .ld = ldc, .bias = bias.data()});
          const std::vector<float> with_bias = product({.bias = bias.data()});
          std::vector<bf16> kept_rounded(s.m * ldc, bf16::from_float(-7.0f));
          const std::vector<float> kept = product(
              {.rounded = kept_rounded.data(), .ld = ldc, .bias = bias.data(), .keep_f32 = true});
          // GELU's aux in one destination, bf16(gelu) in another of a different row stride
          const int64_t gelu_ld = s.n + 1;
          std::vector<bf16> aux(s.m * ldc, bf16::from_float(-7.0f)),
              activated(s.m * gelu_ld, bf16::from_float(-7.0f));
          product({.rounded = aux.data(),
                   .ld = ldc,
                   .bias = bias.data(),
                   .gelu = activated.data(),
                   .gelu_ld = gelu_ld});
          const std::string what = std::string(fallback ? "conversion" : "fast") +
                                   " path, ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                                   " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                                   " k=" + std::to_string(s.k) + " pad=" + std::to_string(s.pad);
          int bad = 0;
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < ldc; ++j) {
              const float want = plain[i * ldc + j] + bias[j < s.n ? j : 0];
              const uint16_t got = rounded[i * ldc + j].bits;
              if (j >= s.n) {  // the padding is not written
                if (got != bf16::from_float(-7.0f).bits && bad++ < 3)
                  ADD_FAILURE() << what << ": padding (" << i << ", " << j << ") written";
                continue;
              }
              if (got != bf16::from_float(want).bits && bad++ < 3)
                ADD_FAILURE() << what << ": rounded (" << i << ", " << j << ") bits " << got
                              << ", want " << bf16::from_float(want).bits << " = bf16(" << want
                              << ")";
              if (std::memcmp(&with_bias[i * ldc + j], &want, 4) != 0 && bad++ < 3)
                ADD_FAILURE() << what << ": f32 with bias (" << i << ", " << j << ") "
                              << with_bias[i * ldc + j] << ", want " << want;
              // keep_f32: the same rounding, and the f32 value left in C as well
              if (kept_rounded[i * ldc + j].bits != bf16::from_float(want).bits && bad++ < 3)
                ADD_FAILURE() << what << ": keep_f32 rounded (" << i << ", " << j << ") bits "
                              << kept_rounded[i * ldc + j].bits << ", want "
                              << bf16::from_float(want).bits;
              if (std::memcmp(&kept[i * ldc + j], &want, 4) != 0 && bad++ < 3)
                ADD_FAILURE() << what << ": keep_f32 f32 (" << i << ", " << j << ") "
                              << kept[i * ldc + j] << ", want " << want;
              // gelu: aux rounded as above, and GELU's f32 value (the kernels' one definition,
              // kernels/cpu/gelu.h) rounded once
              const uint16_t want_gelu = bf16::from_float(kernels::cpu::gelu_forward_of(want)).bits;
              if (aux[i * ldc + j].bits != bf16::from_float(want).bits && bad++ < 3)
                ADD_FAILURE() << what << ": gelu's aux (" << i << ", " << j << ") bits "
                              << aux[i * ldc + j].bits << ", want " << bf16::from_float(want).bits;
              if (activated[i * gelu_ld + j].bits != want_gelu && bad++ < 3)
                ADD_FAILURE() << what << ": gelu (" << i << ", " << j << ") bits "
                              << activated[i * gelu_ld + j].bits << ", want " << want_gelu;
            }
          for (int64_t i = 0; i < s.m; ++i)  // past each row's n values, nothing written
            if (activated[i * gelu_ld + s.n].bits != bf16::from_float(-7.0f).bits && bad++ < 3)
              ADD_FAILURE() << what << ": gelu's padding in row " << i << " written";
        }
  }
  set_sgemm_slab_depth(0);
  set_bf16_gemm_fallback(false);
}

// The bf16 GELU epilogue rounds aux = bf16(pre) and C = bf16(gelu(pre)) in the product's tiles,
// from the registers (Bf16Store::gelu): the same bits as the passes written out by hand here, the
// product's f32 C (sgemm_bf16, no store), the bias added in f32, aux = bf16(pre), C =
// bf16(gelu_forward(pre)) with the cpu's f32 GELU kernel. Padded aux rows (gemm_aux_ld) keep their
// padding; both paths, 1 and 2 threads (C split by columns at m = 200, by rows at m = 400), k
// across slabs (depth 64).
TEST(CpuBf16Gemm, GeluEpilogueGivesTheBitsOfTheUnfusedPasses) {
  struct Shape {
    int64_t m, n, k;
  };
  set_sgemm_slab_depth(64);
  for (const Shape s :
       {Shape{13, 21, 37}, Shape{70, 40, 130}, Shape{200, 100, 70}, Shape{400, 72, 40}})
    for (int flags = 0; flags < 4; ++flags)
      for (const int threads : {1, 2})
        on_both_paths([&](bool fallback) {
          Case cs{bool(flags & 1), bool(flags & 2), s.m, s.n, s.k};
          cs.bias = true;
          Built o = build(cs, 900 + flags);
          GemmEpilogue e;
          e.activation = GemmActivation::gelu;
          e.aux_ld = kernels::gemm_aux_ld(s.n);
          const bf16 untouched = bf16::from_float(-3.0f);
          e.aux = bf16_tensor(std::vector<bf16>(s.m * e.aux_ld, untouched));
          testing::with_threads(threads, [&] {
            cpu_backend().gemm_epilogue(o.g, e);
            return 0;
          });
          // the passes by hand
          Tensor pre = Tensor::empty({s.m, s.n}, DType::f32, kCPU);
          float* p = pre.data<float>();
          sgemm_bf16(cs.ta, cs.tb, s.m, s.n, s.k, 1.0f, o.g.a.data<bf16>(), o.g.lda,
                     o.g.b.data<bf16>(), o.g.ldb, 0.0f, p, s.n);
          const bf16* bias = o.g.bias.data<bf16>();
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) p[i * s.n + j] += bias[j].to_float();
          std::vector<float> pre_values(p, p + s.m * s.n);
          cpu_backend().gelu_forward(pre, pre);
          const bf16* c = o.g.c.data<bf16>();
          const bf16* aux = e.aux.data<bf16>();
          const std::string what = describe(cs, fallback) + " threads=" + std::to_string(threads);
          int bad = 0;
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < e.aux_ld; ++j) {
              if (j >= s.n) {
                if (aux[i * e.aux_ld + j].bits != untouched.bits && bad++ < 3)
                  ADD_FAILURE() << what << ": aux padding (" << i << ", " << j << ") written";
                continue;
              }
              const uint16_t want_aux = bf16::from_float(pre_values[i * s.n + j]).bits,
                             want_c = bf16::from_float(p[i * s.n + j]).bits;
              if (aux[i * e.aux_ld + j].bits != want_aux && bad++ < 3)
                ADD_FAILURE() << what << ": aux[" << i << "][" << j << "] bits "
                              << aux[i * e.aux_ld + j].bits << ", want " << want_aux;
              if (c[i * s.n + j].bits != want_c && bad++ < 3)
                ADD_FAILURE() << what << ": C[" << i << "][" << j << "] bits "
                              << c[i * s.n + j].bits << ", want " << want_c;
            }
        });
  set_sgemm_slab_depth(0);
}

// The row sums of a transposed A, which the fast path takes while it packs A's pairs: each exactly
// the double sum over k ascending, rounded to f32 (sum_rows_of_a's order, and the conversion
// path's), across k slabs (depth 64, odd k), in threads' shares split by rows (m = 400) and by
// columns (m = 24), and with 1 or 2 threads.
TEST(CpuBf16Gemm, RowSumsOfTransposedATakenWhilePackingAreExactDoubleSums) {
  set_sgemm_slab_depth(64);
  const Product products[] = {
      {true, false, 400, 96, 131}, {true, true, 24, 640, 200}, {true, false, 13, 40, 7}};
  uint32_t seed = 1700;
  for (const Product& p : products)
    on_both_paths([&](bool fallback) {
      const std::vector<bf16> a = random_bf16(p.m * p.k, seed++),
                              b = random_bf16(p.k * p.n, seed++);
      std::vector<float> want(p.m);
      for (int64_t i = 0; i < p.m; ++i) {
        double s = 0;
        for (int64_t q = 0; q < p.k; ++q) s += a[q * p.m + i].to_float();
        want[i] = static_cast<float>(s);
      }
      for (const int threads : {1, 2}) {
        std::vector<float> sums;
        testing::with_threads(threads, [&] {
          return run_sgemm_bf16(p, a, b, std::vector<float>(p.m * p.n, 0.0f), &sums);
        });
        for (int64_t i = 0; i < p.m; ++i)
          ASSERT_EQ(sums[i], want[i])
              << (fallback ? "conversion" : "fast") << " path, m=" << p.m << " n=" << p.n
              << " k=" << p.k << " threads=" << threads << " row " << i;
      }
    });
  set_sgemm_slab_depth(0);
}

// The bf16 dGELU epilogue, with and without the bias gradient of C's columns: gelu' reads the bf16
// aux as it is (no f32 copy, where aux rows are unpadded); the same bits as the passes written out
// by hand here: the product's f32 C, aux widened to f32, the cpu's f32 gelu_backward, sum_dim of
// the f32 result, each rounded once. Unpadded (n a multiple of 8) and padded aux rows; both paths,
// 1 and 2 threads (C split by rows at m = 400), k across slabs (depth 64).
TEST(CpuBf16Gemm, DgeluEpilogueGivesTheBitsOfTheUnfusedPasses) {
  struct Shape {
    int64_t m, n, k;
  };
  set_sgemm_slab_depth(64);
  for (const Shape s :
       {Shape{13, 40, 37}, Shape{70, 64, 130}, Shape{30, 21, 50}, Shape{400, 72, 100}})
    for (int flags = 0; flags < 8; ++flags)
      for (const int threads : {1, 2})
        on_both_paths([&](bool fallback) {
          Case cs{bool(flags & 1), bool(flags & 2), s.m, s.n, s.k};
          const bool column_sums = !(flags & 4);
          Built o = build(cs, 1100 + flags);
          GemmEpilogue e;
          e.activation = GemmActivation::gelu_backward;
          e.aux_ld = kernels::gemm_aux_ld(s.n);
          e.aux = bf16_tensor(random_bf16(s.m * e.aux_ld, 1200 + flags));
          if (column_sums) {
            e.bias_grad_of = GemmBiasGrad::columns_of_c;
            e.bias_grad = bf16_tensor(std::vector<bf16>(s.n, bf16::from_float(0)));
          }
          testing::with_threads(threads, [&] {
            cpu_backend().gemm_epilogue(o.g, e);
            return 0;
          });
          // the passes by hand
          Tensor pre = Tensor::empty({s.m, s.n}, DType::f32, kCPU),
                 aux32 = Tensor::empty({s.m, s.n}, DType::f32, kCPU),
                 sums = Tensor::empty({s.n}, DType::f32, kCPU);
          float* p = pre.data<float>();
          sgemm_bf16(cs.ta, cs.tb, s.m, s.n, s.k, 1.0f, o.g.a.data<bf16>(), o.g.lda,
                     o.g.b.data<bf16>(), o.g.ldb, 0.0f, p, s.n);
          const bf16* aux = e.aux.data<bf16>();
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j)
              aux32.data<float>()[i * s.n + j] = aux[i * e.aux_ld + j].to_float();
          cpu_backend().gelu_backward(aux32, pre, pre);
          cpu_backend().sum_dim(pre, sums, 0);
          const bf16* c = o.g.c.data<bf16>();
          const std::string what = describe(cs, fallback) + " threads=" + std::to_string(threads) +
                                   " column sums=" + std::to_string(column_sums);
          int bad = 0;
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) {
              const uint16_t want = bf16::from_float(p[i * s.n + j]).bits;
              if (c[i * s.n + j].bits != want && bad++ < 3)
                ADD_FAILURE() << what << ": C[" << i << "][" << j << "] bits "
                              << c[i * s.n + j].bits << ", want " << want;
            }
          for (int64_t j = 0; j < s.n && column_sums; ++j)
            EXPECT_EQ(e.bias_grad.data<bf16>()[j].bits,
                      bf16::from_float(sums.data<float>()[j]).bits)
                << what << ": bias_grad[" << j << "]";
        });
  set_sgemm_slab_depth(0);
}

// The k-pair packing (sgemm_bf16_kernel.h) against its definition, word by word: panel p's word
// for k pair q and line l (a row of op(A), a column of op(B)) is (x[2q], x[2q + 1]) of line
// p W + l, low half first, with zeros past the lines and past an odd k. The widths and depths
// cover the 8 x 16 shuffled transpose (eight lines and 16 pairs at a time, where the CPU has
// AVX-512), its leftover lines and pairs, and the word-at-a-time path alone.
TEST(CpuBf16Gemm, PackedPairsAreTheWordsOfTheirLines) {
  using kernels::cpu::kBf16MR;
  using kernels::cpu::kBf16NR;
  uint32_t seed = 2600;
  for (const bool pack_a : {true, false})
    for (const bool trans : {false, true})
      for (const int64_t lines : {1, 7, 8, 9, 17, 32, 33, 70})
        for (const int64_t kc : {1, 2, 31, 32, 33, 64, 95}) {
          // a line runs along the stored rows when op(A) is not transposed or op(B) is: line l's
          // value at k is op(A)[i0 + l][p0 + k] or op(B)[p0 + k][i0 + l]
          const bool along_rows = pack_a != trans;
          const int64_t width = pack_a ? kBf16MR : kBf16NR, p0 = 2, i0 = 1,
                        panels = (lines + width - 1) / width;
          const int64_t ld = (along_rows ? p0 + kc : i0 + lines) + 3,
                        stored_rows = along_rows ? i0 + lines : p0 + kc;
          const std::vector<bf16> x = random_bf16(stored_rows * ld, seed++);
          const auto value = [&](int64_t l, int64_t k) {
            return along_rows ? x[(i0 + l) * ld + p0 + k] : x[(p0 + k) * ld + i0 + l];
          };
          const int64_t pairs = kernels::cpu::k_pairs(kc);
          std::vector<uint32_t> got(static_cast<size_t>(panels * width * pairs), 0xdeadbeef);
          if (pack_a)
            kernels::cpu::pack_a_bf16_pairs(x.data(), ld, trans, i0, lines, p0, kc, got.data());
          else
            kernels::cpu::pack_b_bf16_pairs(x.data(), ld, trans, p0, kc, i0, lines, got.data());
          int bad = 0;
          for (int64_t panel = 0; panel < panels; ++panel)
            for (int64_t q = 0; q < pairs; ++q)
              for (int64_t l = 0; l < width; ++l) {
                const int64_t line = panel * width + l;
                const uint16_t low = line < lines ? value(line, 2 * q).bits : 0,
                               high =
                                   line < lines && 2 * q + 1 < kc ? value(line, 2 * q + 1).bits : 0;
                const uint32_t want = low | uint32_t{high} << 16,
                               word = got[static_cast<size_t>((panel * pairs + q) * width + l)];
                if (word != want && bad++ < 3)
                  ADD_FAILURE() << (pack_a ? "A" : "B") << (trans ? " transposed" : "")
                                << ", lines " << lines << ", kc " << kc << ": panel " << panel
                                << ", pair " << q << ", line " << l << ": 0x" << std::hex << word
                                << ", want 0x" << want << std::dec;
              }
        }
}

// A launch is judged against the roof of the unit it says its FLOPs ran on (engine/launch.h): a
// bf16 product on vdpbf16ps against the cpu's bf16 peak (2x the f32 one), the conversion path's
// against the f32 peak. Said wrongly, the step explorer drew the bf16 GEMMs above their roof.
TEST(CpuBf16Gemm, LaunchesNameTheUnitTheirProductsRanOn) {
  const int64_t B = 1, T = 16, H = 2, D = 8, C = H * D;
  on_both_paths([&](bool fallback) {
    SCOPED_TRACE(fallback ? "conversion path" : "vdpbf16ps where the CPU has it");
    const ComputeUnit products =
        !fallback && cpu_has_avx512_bf16() ? ComputeUnit::tensor_core_bf16 : ComputeUnit::cuda_core;
    const Tensor qkv = Tensor::empty({B, T, 3 * C}, DType::bf16),
                 out = Tensor::empty({B, T, C}, DType::bf16),
                 lse = Tensor::empty({B, H, T}, DType::f32);
    cpu_backend().fill(qkv, 0.25);
    Built o = build(kShapes[4], 31);
    testing::LaunchRecorder rec;
    cpu_backend().gemm(o.g);
    cpu_backend().flash_attention_forward(qkv, out, lse, H, H, 0.35);
    EXPECT_EQ(rec.last("gemm").unit, products);
    EXPECT_EQ(rec.last("flash_attention_forward").unit, products);
  });
  // f32 products run on the FMA units on either setting
  const Tensor qkv = Tensor::empty({B, T, 3 * C}), out = Tensor::empty({B, T, C}),
               lse = Tensor::empty({B, H, T});
  cpu_backend().fill(qkv, 0.25);
  testing::LaunchRecorder rec;
  cpu_backend().flash_attention_forward(qkv, out, lse, H, H, 0.35);
  EXPECT_EQ(rec.last("flash_attention_forward").unit, ComputeUnit::cuda_core);
}

}  // namespace
}  // namespace glass::cpu_bf16_gemm_test
