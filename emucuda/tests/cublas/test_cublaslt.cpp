// The emulated cuBLASLt (emucuda/cublas/cublasLt.h) against a naive column-major reference
// written here in double: every epilogue the engine uses, f32 and bf16 data, TF32 rounding,
// transposes, padded leading dimensions, strided batches, and the argument checks that must fail
// as they fail on a GPU (and leave D untouched).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "emucuda/cublas/cublasLt.h"
#include "engine/dtype.h"
#include "tests/emu_cublas/emu_cublas_test.h"
#include "tests/testing.h"

namespace glass::emu_cublas_test {
namespace {

using glass::testing::all_close;

double gelu_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double gelu_grad_ref(double x) {  // d/dx of gelu_ref, by the product and chain rules
  const double s = std::sqrt(2 / M_PI), t = std::tanh(s * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * 0.044715 * x * x);
}

// The largest power of two up to 256 dividing p's address.
uint32_t alignment_of(const void* p) {
  uint32_t align = 1;
  while (align < 256 && reinterpret_cast<uintptr_t>(p) % (2 * align) == 0) align *= 2;
  return align;
}

// The handle and descriptors of one call, destroyed at the end of the test.
struct Lt {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  explicit Lt(cublasComputeType_t compute = CUBLAS_COMPUTE_32F) {
    EXPECT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  }
  ~Lt() {
    for (cublasLtMatrixLayout_t l : {a, b, c, d}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    EXPECT_EQ(cublasLtDestroy(h), CUBLAS_STATUS_SUCCESS);
  }
  template <class T>
  cublasStatus_t set(cublasLtMatmulDescAttributes_t attr, T value) {
    return cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value));
  }
  void layouts(cudaDataType_t in, cudaDataType_t out, int64_t a_rows, int64_t a_cols, int64_t lda,
               int64_t b_rows, int64_t b_cols, int64_t ldb, int64_t m, int64_t n, int64_t ldd) {
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&a, in, a_rows, a_cols, lda), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&b, in, b_rows, b_cols, ldb), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&c, out, m, n, ldd), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&d, out, m, n, ldd), CUBLAS_STATUS_SUCCESS);
  }
  // The heuristic's algorithm, then the matmul with it (D = C in place). The heuristic is told
  // each pointer's alignment (as kernels/cuda/gemm_lt.cu does), at most max_alignment bytes (a
  // strided batch's matrices are only as aligned as its stride).
  uint32_t max_alignment = 256;
  cublasStatus_t matmul(float alpha, const void* A, const void* B, float beta, void* D) {
    const std::pair<cublasLtMatmulPreferenceAttributes_t, const void*> operands[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, A},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, B},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, D},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, D}};
    for (const auto& [attr, p] : operands) {
      const uint32_t bytes = std::min(alignment_of(p), max_alignment);
      EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)),
                CUBLAS_STATUS_SUCCESS);
    }
    cublasLtMatmulHeuristicResult_t r{};
    int count = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, d, pref, 1, &r, &count);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    EXPECT_EQ(count, 1);
    return cublasLtMatmul(h, desc, &alpha, A, a, B, b, &beta, D, c, D, d, &r.algo, nullptr, 0,
                          nullptr);
  }
};

// One column-major problem: op(A) m x k, op(B) k x n, D m x n, leading dimensions padded.
struct Geometry {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, pad = 0;
  int64_t a_rows() const { return ta ? k : m; }
  int64_t a_cols() const { return ta ? m : k; }
  int64_t b_rows() const { return tb ? n : k; }
  int64_t b_cols() const { return tb ? k : n; }
  int64_t lda() const { return a_rows() + pad; }
  int64_t ldb() const { return b_rows() + pad; }
  int64_t ldd() const { return m + pad; }
  double op_a(const std::vector<double>& a, int64_t i, int64_t l) const {
    return ta ? a[l + i * lda()] : a[i + l * lda()];
  }
  double op_b(const std::vector<double>& b, int64_t l, int64_t j) const {
    return tb ? b[j + l * ldb()] : b[l + j * ldb()];
  }
  // alpha op(A) op(B) + beta C, m x n with leading dimension ldd.
  std::vector<double> product(const std::vector<double>& a, const std::vector<double>& b,
                              double alpha, double beta, const std::vector<double>& c) const {
    std::vector<double> out(c);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < m; ++i) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l) s += op_a(a, i, l) * op_b(b, l, j);
        out[i + j * ldd()] = alpha * s + (beta == 0 ? 0 : beta * c[i + j * ldd()]);
      }
    return out;
  }
};

const Geometry kShapes[] = {{false, false, 7, 13, 33, 0},
                            {true, false, 16, 5, 9, 3},
                            {false, true, 9, 1, 17, 1},
                            {true, true, 1, 11, 6, 0}};

TEST(EmuCublasLt, BiasGeluAuxEpiloguesMatchTheDefinitionInF32) {
  uint64_t seed = 100;
  for (const Geometry& g : kShapes)
    for (cublasLtEpilogue_t ep :
         {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS,
          CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUBLASLT_EPILOGUE_GELU_AUX}) {
      Lt lt;
      lt.layouts(CUDA_R_32F, CUDA_R_32F, g.a_rows(), g.a_cols(), g.lda(), g.b_rows(), g.b_cols(),
                 g.ldb(), g.m, g.n, g.ldd());
      ASSERT_EQ(lt.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N),
                CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(lt.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N),
                CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(lt.set<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, ep), CUBLAS_STATUS_SUCCESS);
      const std::vector<float> a = randoms(g.lda() * g.a_cols(), seed++),
                               b = randoms(g.ldb() * g.b_cols(), seed++),
                               bias = randoms(g.m, seed++);
      std::vector<float> d = randoms(g.ldd() * g.n, seed++);
      const int64_t aux_ld = (g.m + 7) / 8 * 8;  // a multiple of 8, at least m
      std::vector<float> aux(aux_ld * g.n, kNaN);
      ASSERT_EQ(lt.set<const void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.data()),
                CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(lt.set<void*>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux.data()),
                CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(lt.set<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld),
                CUBLAS_STATUS_SUCCESS);
      const float alpha = 0.75f, beta = 0.5f;
      // The reference: pre = alpha AB + beta C (+ bias[i], one per row of D), then the epilogue.
      std::vector<double> expected =
          g.product(as_double(a), as_double(b), alpha, beta, as_double(d));
      std::vector<double> pre = expected;
      const bool bias_on = ep == CUBLASLT_EPILOGUE_BIAS || ep == CUBLASLT_EPILOGUE_GELU_BIAS ||
                           ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
      const bool gelu_on = ep != CUBLASLT_EPILOGUE_DEFAULT && ep != CUBLASLT_EPILOGUE_BIAS;
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.m; ++i) {
          double& v = expected[i + j * g.ldd()];
          if (bias_on) v += bias[i];
          pre[i + j * g.ldd()] = v;
          if (gelu_on) v = gelu_ref(v);
        }
      ASSERT_EQ(lt.matmul(alpha, a.data(), b.data(), beta, d.data()), CUBLAS_STATUS_SUCCESS);
      EXPECT_TRUE(all_close(as_double(d), expected, 1e-5))
          << "epilogue " << ep << " m " << g.m << " n " << g.n << " k " << g.k;
      const bool aux_on = ep == CUBLASLT_EPILOGUE_GELU_AUX || ep == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < aux_ld; ++i) {
          const float got = aux[i + j * aux_ld];
          if (aux_on && i < g.m)
            EXPECT_NEAR(got, pre[i + j * g.ldd()], 1e-4) << "aux (" << i << ", " << j << ")";
          else
            EXPECT_TRUE(std::isnan(got)) << "aux written outside the epilogue's rows";
        }
    }
}

TEST(EmuCublasLt, DgeluAndBiasGradientEpiloguesMatchTheDefinition) {
  uint64_t seed = 200;
  for (const Geometry& g : kShapes)
    for (cublasLtEpilogue_t ep : {CUBLASLT_EPILOGUE_DGELU, CUBLASLT_EPILOGUE_DGELU_BGRAD,
                                  CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB}) {
      Lt lt;
      lt.layouts(CUDA_R_32F, CUDA_R_32F, g.a_rows(), g.a_cols(), g.lda(), g.b_rows(), g.b_cols(),
                 g.ldb(), g.m, g.n, g.ldd());
      lt.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, g.ta ? CUBLAS_OP_T : CUBLAS_OP_N);
      lt.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB, g.tb ? CUBLAS_OP_T : CUBLAS_OP_N);
      ASSERT_EQ(lt.set<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, ep), CUBLAS_STATUS_SUCCESS);
      const std::vector<float> a = randoms(g.lda() * g.a_cols(), seed++),
                               b = randoms(g.ldb() * g.b_cols(), seed++);
      const int64_t aux_ld = (g.m + 7) / 8 * 8 + 8;
      const std::vector<float> aux = randoms(aux_ld * g.n, seed++, 2.0);
      const int64_t bias_len = ep == CUBLASLT_EPILOGUE_BGRADB ? g.n : g.m;
      std::vector<float> bias(bias_len + 1, kNaN), d(g.ldd() * g.n, kNaN);
      lt.set<void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.data());
      lt.set<const void*>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux.data());
      lt.set<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
      const std::vector<double> A = as_double(a), B = as_double(b);
      std::vector<double> expected = g.product(A, B, 1.0, 0.0, as_double(d));
      std::vector<double> bias_expected(bias_len, 0.0);
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.m; ++i) {
          double& v = expected[i + j * g.ldd()];
          if (ep == CUBLASLT_EPILOGUE_DGELU || ep == CUBLASLT_EPILOGUE_DGELU_BGRAD)
            v *= gelu_grad_ref(aux[i + j * aux_ld]);
          if (ep == CUBLASLT_EPILOGUE_DGELU_BGRAD) bias_expected[i] += v;  // over D's columns
        }
      for (int64_t l = 0; l < g.k; ++l) {  // over k, of op(A)'s rows or op(B)'s columns
        if (ep == CUBLASLT_EPILOGUE_BGRADA)
          for (int64_t i = 0; i < g.m; ++i) bias_expected[i] += g.op_a(A, i, l);
        if (ep == CUBLASLT_EPILOGUE_BGRADB)
          for (int64_t j = 0; j < g.n; ++j) bias_expected[j] += g.op_b(B, l, j);
      }
      ASSERT_EQ(lt.matmul(1.0f, a.data(), b.data(), 0.0f, d.data()), CUBLAS_STATUS_SUCCESS);
      // D's padding rows stay as they were (NaN); the rest is the reference.
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = g.m; i < g.ldd(); ++i) EXPECT_TRUE(std::isnan(d[i + j * g.ldd()]));
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.m; ++i)
          EXPECT_NEAR(d[i + j * g.ldd()], expected[i + j * g.ldd()],
                      1e-4 * (1 + std::abs(expected[i + j * g.ldd()])))
              << "epilogue " << ep << " D(" << i << ", " << j << ")";
      if (ep == CUBLASLT_EPILOGUE_DGELU) {
        for (float v : bias) EXPECT_TRUE(std::isnan(v)) << "DGELU wrote a bias gradient";
        continue;
      }
      for (int64_t i = 0; i < bias_len; ++i)
        EXPECT_NEAR(bias[i], bias_expected[i], 1e-4 * (1 + std::abs(bias_expected[i])))
            << "epilogue " << ep << " bias gradient " << i;
      EXPECT_TRUE(std::isnan(bias[bias_len])) << "bias gradient written past its length";
    }
}

// bf16 in, bf16 or f32 out: the product of the bf16 values accumulated in f32, rounded once.
TEST(EmuCublasLt, Bf16InputsAccumulateInF32AndRoundOnce) {
  const Geometry g{true, false, 24, 16, 40, 0};
  for (cudaDataType_t out : {CUDA_R_16BF, CUDA_R_32F}) {
    Lt lt;
    lt.layouts(CUDA_R_16BF, out, g.a_rows(), g.a_cols(), g.lda(), g.b_rows(), g.b_cols(), g.ldb(),
               g.m, g.n, g.ldd());
    lt.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    lt.set<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU_AUX_BIAS);
    const std::vector<float> af = randoms(g.lda() * g.a_cols(), 301),
                             bf = randoms(g.ldb() * g.b_cols(), 302), biasf = randoms(g.m, 303);
    std::vector<bf16> a, b, bias16;
    std::vector<double> A, B;
    for (float v : af) a.push_back(bf16::from_float(v)), A.push_back(a.back().to_float());
    for (float v : bf) b.push_back(bf16::from_float(v)), B.push_back(b.back().to_float());
    for (float v : biasf) bias16.push_back(bf16::from_float(v));
    std::vector<float> bias32(biasf);
    const void* bias = out == CUDA_R_16BF ? static_cast<const void*>(bias16.data()) : bias32.data();
    const size_t es = out == CUDA_R_16BF ? 2 : 4;
    std::vector<char> d(es * g.ldd() * g.n), aux(es * g.ldd() * g.n);
    lt.set<const void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
    lt.set<void*>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux.data());
    lt.set<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ldd());
    ASSERT_EQ(lt.matmul(1.0f, a.data(), b.data(), 0.0f, d.data()), CUBLAS_STATUS_SUCCESS);
    const std::vector<double> prod = g.product(A, B, 1, 0, std::vector<double>(g.ldd() * g.n));
    auto at = [&](const std::vector<char>& v, int64_t idx) -> double {
      if (out == CUDA_R_32F) {
        float f;
        std::memcpy(&f, v.data() + idx * 4, 4);
        return f;
      }
      bf16 h;
      std::memcpy(&h.bits, v.data() + idx * 2, 2);
      return h.to_float();
    };
    // One rounding to bf16 is at most half an ulp: 2^-9 relative (8 significant bits).
    const double tol = out == CUDA_R_16BF ? 1.0 / 256 : 1e-5;
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        const double bias_i = out == CUDA_R_16BF ? bias16[i].to_float() : bias32[i];
        const double pre = prod[i + j * g.ldd()] + bias_i;
        EXPECT_NEAR(at(aux, i + j * g.ldd()), pre, tol * (1 + std::abs(pre)));
        EXPECT_NEAR(at(d, i + j * g.ldd()), gelu_ref(pre), tol * (1 + std::abs(pre)));
      }
  }
}

// FAST_TF32 rounds f32 inputs to 10 mantissa bits: 1 + 2^-12 becomes 1, while COMPUTE_32F
// keeps it. 1 x 1 times 1 x 1 shows it exactly.
TEST(EmuCublasLt, FastTf32RoundsInputsAndComputeF32DoesNot) {
  const float x = 1.0f + std::ldexp(1.0f, -12), y = 3.0f;
  for (cublasComputeType_t compute : {CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32}) {
    Lt lt(compute);
    lt.layouts(CUDA_R_32F, CUDA_R_32F, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    float d = kNaN;
    ASSERT_EQ(lt.matmul(1.0f, &x, &y, 0.0f, &d), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(d, compute == CUBLAS_COMPUTE_32F ? x * y : 3.0f) << "compute " << compute;
  }
  // TF32 is for f32 data: with bf16 inputs the combination is not supported.
  Lt lt(CUBLAS_COMPUTE_32F_FAST_TF32);
  lt.layouts(CUDA_R_16BF, CUDA_R_16BF, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  bf16 one = bf16::from_float(1), out;
  EXPECT_EQ(lt.matmul(1.0f, &one, &one, 0.0f, &out), CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST(EmuCublasLt, StridedBatchesUseTheirOffsetsAndTheBiasBatchStride) {
  const Geometry g{false, false, 5, 4, 3, 0};
  const int32_t batch = 3;
  Lt lt;
  lt.layouts(CUDA_R_32F, CUDA_R_32F, g.m, g.k, g.m, g.k, g.n, g.k, g.m, g.n, g.m);
  const int64_t sa = g.m * g.k + 2, sb = 0, sd = g.m * g.n + 1;  // B shared (stride 0)
  for (auto [l, s] :
       {std::pair{lt.a, sa}, std::pair{lt.b, sb}, std::pair{lt.c, sd}, std::pair{lt.d, sd}}) {
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, 4),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, 8),
        CUBLAS_STATUS_SUCCESS);
  }
  lt.max_alignment = 4;  // strides of 17 and 21 floats
  lt.set<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  const std::vector<float> a = randoms(sa * batch, 401), b = randoms(g.k * g.n, 402),
                           bias = randoms(g.m * batch, 403);
  lt.set<const void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.data());
  lt.set<int64_t>(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, g.m);
  std::vector<float> d(sd * batch, kNaN);
  ASSERT_EQ(lt.matmul(1.0f, a.data(), b.data(), 0.0f, d.data()), CUBLAS_STATUS_SUCCESS);
  for (int e = 0; e < batch; ++e) {
    const std::vector<double> A(a.begin() + e * sa, a.begin() + e * sa + g.m * g.k);
    std::vector<double> expected = g.product(A, as_double(b), 1, 0, std::vector<double>(g.m * g.n));
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) expected[i + j * g.m] += bias[e * g.m + i];
    const std::vector<float> got(d.begin() + e * sd, d.begin() + e * sd + g.m * g.n);
    EXPECT_TRUE(all_close(as_double(got), expected, 1e-5)) << "batch entry " << e;
    EXPECT_TRUE(std::isnan(d[e * sd + g.m * g.n])) << "the gap after entry " << e << " was written";
  }
}

// The heuristic picks its algorithm for the alignment it is told (256 bytes by default), and the
// algorithm refuses data less aligned than that, where a GPU kernel chosen for wide loads could
// fault with a misaligned address: a pointer one float into a buffer, or a batch stride of an odd
// number of floats.
TEST(EmuCublasLt, AnAlgorithmRefusesDataLessAlignedThanItWasChosenFor) {
  const Geometry g{false, false, 4, 4, 4, 0};
  alignas(256) static float a[64], b[64], d[64];
  const std::vector<float> values = randoms(16, 501);
  std::copy(values.begin(), values.end(), a + 1);
  std::copy(values.begin(), values.end(), b);
  auto problem = [&](Lt& lt) {
    lt.layouts(CUDA_R_32F, CUDA_R_32F, g.m, g.k, g.m, g.k, g.n, g.k, g.m, g.n, g.m);
  };
  auto run = [&](Lt& lt, const float* A, uint32_t told_a) {
    cublasLtMatmulHeuristicResult_t r{};
    int count = 0;
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                  lt.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &told_a, sizeof(told_a)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt.h, lt.desc, lt.a, lt.b, lt.c, lt.d, lt.pref, 1, &r,
                                             &count),
              CUBLAS_STATUS_SUCCESS);
    const float one = 1, zero = 0;
    return cublasLtMatmul(lt.h, lt.desc, &one, A, lt.a, b, lt.b, &zero, d, lt.c, d, lt.d, &r.algo,
                          nullptr, 0, nullptr);
  };
  {  // told 256 (the default), A 4 bytes into a 256-byte aligned buffer: refused, D untouched
    Lt lt;
    problem(lt);
    std::fill(d, d + 64, 7.0f);
    EXPECT_EQ(run(lt, a + 1, 256), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(d[0], 7.0f);
  }
  {  // told 4: the same data is multiplied
    Lt lt;
    problem(lt);
    ASSERT_EQ(run(lt, a + 1, 4), CUBLAS_STATUS_SUCCESS);
    const std::vector<double> expected =
        g.product(as_double(std::vector<float>(a + 1, a + 17)),
                  as_double(std::vector<float>(b, b + 16)), 1, 0, std::vector<double>(16));
    EXPECT_TRUE(all_close(as_double(std::vector<float>(d, d + 16)), expected, 1e-5));
  }
  {  // an aligned A whose batch stride (17 floats) is not
    Lt lt;
    problem(lt);
    const int32_t two = 2;
    const int64_t stride = 17, none = 0;
    for (cublasLtMatrixLayout_t l : {lt.a, lt.b, lt.c, lt.d})
      ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, 4),
                CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(lt.a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &stride, 8),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(lt.b, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &none, 8),
              CUBLAS_STATUS_SUCCESS);
    const int64_t d_stride = 16;
    for (cublasLtMatrixLayout_t l : {lt.c, lt.d})
      ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &d_stride, 8),
                CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(run(lt, a, 16), CUBLAS_STATUS_INVALID_VALUE);
  }
}

// Every argument the library refuses, and that a refused call writes nothing.
TEST(EmuCublasLt, BadArgumentsAreRefusedAsOnAGpu) {
  const cublasStatus_t invalid = CUBLAS_STATUS_INVALID_VALUE,
                       unsupported = CUBLAS_STATUS_NOT_SUPPORTED;
  std::vector<float> a(256, 1), b(256, 1), bias(64, 1), aux(256, 1), d(256, 7);
  auto fresh = [&](Lt& lt, int64_t lda) {
    lt.layouts(CUDA_R_32F, CUDA_R_32F, 6, 4, lda, 4, 5, 4, 6, 5, 6);
  };
  {  // ld below the rows as stored.
    Lt lt;
    fresh(lt, 5);
    EXPECT_EQ(lt.matmul(1, a.data(), b.data(), 0, d.data()), invalid);
  }
  {  // A transposed but stored m x k: op(A) would be 4 x 6, not m x k.
    Lt lt;
    fresh(lt, 6);
    lt.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    EXPECT_EQ(lt.matmul(1, a.data(), b.data(), 0, d.data()), invalid);
  }
  {  // A bias epilogue without a bias.
    Lt lt;
    fresh(lt, 6);
    lt.set<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    EXPECT_EQ(lt.matmul(1, a.data(), b.data(), 0, d.data()), invalid);
  }
  {  // Aux: missing, ld below m, ld not a multiple of 8.
    for (int64_t aux_ld : {int64_t{0}, int64_t{4}, int64_t{12}}) {
      Lt lt;
      fresh(lt, 6);
      lt.set<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU_AUX);
      if (aux_ld != 0) lt.set<void*>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux.data());
      lt.set<int64_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld == 0 ? 8 : aux_ld);
      EXPECT_EQ(lt.matmul(1, a.data(), b.data(), 0, d.data()), invalid) << "aux ld " << aux_ld;
    }
  }
  {  // Batch counts that differ.
    Lt lt;
    fresh(lt, 6);
    const int32_t two = 2;
    cublasLtMatrixLayoutSetAttribute(lt.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, 4);
    EXPECT_EQ(lt.matmul(1, a.data(), b.data(), 0, d.data()), invalid);
  }
  {  // An algorithm that did not come from the heuristic.
    Lt lt;
    fresh(lt, 6);
    cublasLtMatmulAlgo_t junk{};
    const float one = 1, zero = 0;
    EXPECT_EQ(cublasLtMatmul(lt.h, lt.desc, &one, a.data(), lt.a, b.data(), lt.b, &zero, d.data(),
                             lt.c, d.data(), lt.d, &junk, nullptr, 0, nullptr),
              invalid);
  }
  {  // Attribute sizes, unknown op flags, and what the emulation does not implement.
    Lt lt;
    const int64_t wide = CUBLAS_OP_T;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(lt.desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, 8),
              invalid);
    EXPECT_EQ(lt.set<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, 7), invalid);
    EXPECT_EQ(lt.set<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_RELU), unsupported);
    EXPECT_EQ(lt.set<int32_t>(CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_DEVICE),
              unsupported);
    fresh(lt, 6);
    const int32_t row = CUBLASLT_ORDER_ROW;
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(lt.a, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, 4),
              unsupported);
    cublasLtMatrixLayout_t half = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&half, CUDA_R_16F, 4, 4, 4), unsupported);
    // A bias type other than D's.
    lt.set<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    lt.set<const void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.data());
    EXPECT_EQ(lt.set<int32_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_16BF),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(lt.matmul(1, a.data(), b.data(), 0, d.data()), unsupported);
  }
  for (float v : d) ASSERT_EQ(v, 7.0f) << "a refused call wrote to D";
  // No handle.
  cublasLtMatmulHeuristicResult_t r{};
  int count = 5;
  Lt lt;
  fresh(lt, 6);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(nullptr, lt.desc, lt.a, lt.b, lt.c, lt.d, lt.pref, 1, &r,
                                           &count),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(count, 0);
}

}  // namespace
}  // namespace glass::emu_cublas_test
