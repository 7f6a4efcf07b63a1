// The emulated cuBLAS (emucuda/cublas) against a naive column-major GEMM written here: every op
// combination, odd sizes, padded leading dimensions, strided batches (stride 0 included), the
// alpha/beta special cases, and the argument checks that must fail as they fail on a GPU.
#include <cmath>
#include <limits>

#include "emucuda/cublas/cublas_v2.h"
#include "tests/emu_cublas/emu_cublas_test.h"
#include "tests/testing.h"

namespace glass::emu_cublas_test {
namespace {

using glass::testing::all_close;

// A handle for one test.
struct Handle {
  cublasHandle_t h = nullptr;
  Handle() { EXPECT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS); }
  ~Handle() { EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS); }
};

// One column-major GEMM's geometry; matrices as stored are rows x cols with leading dimension
// rows + pad.
struct Gemm {
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0, pad = 0;
  int a_rows() const { return ta == CUBLAS_OP_N ? m : k; }
  int a_cols() const { return ta == CUBLAS_OP_N ? k : m; }
  int b_rows() const { return tb == CUBLAS_OP_N ? k : n; }
  int b_cols() const { return tb == CUBLAS_OP_N ? n : k; }
  int lda() const { return std::max(1, a_rows()) + pad; }
  int ldb() const { return std::max(1, b_rows()) + pad; }
  int ldc() const { return std::max(1, m) + pad; }
  size_t a_size() const { return static_cast<size_t>(lda()) * a_cols(); }
  size_t b_size() const { return static_cast<size_t>(ldb()) * b_cols(); }
  size_t c_size() const { return static_cast<size_t>(ldc()) * n; }
};

// C = alpha op(A) op(B) + beta C in double, straight from the definition (column-major: element
// (i, j) of X is X[i + j ld]); beta == 0 ignores C. Padding rows of C keep their values.
std::vector<double> naive_gemm(const Gemm& g, double alpha, const float* a, const float* b,
                               double beta, const float* c) {
  std::vector<double> out(c, c + g.c_size());
  for (int j = 0; j < g.n; ++j)
    for (int i = 0; i < g.m; ++i) {
      double acc = 0;
      for (int l = 0; l < g.k; ++l) {
        const double op_a = g.ta == CUBLAS_OP_N ? a[i + l * g.lda()] : a[l + i * g.lda()];
        const double op_b = g.tb == CUBLAS_OP_N ? b[l + j * g.ldb()] : b[j + l * g.ldb()];
        acc += op_a * op_b;
      }
      const double old = beta == 0 ? 0 : beta * c[i + j * g.ldc()];
      out[i + j * g.ldc()] = alpha * acc + old;
    }
  return out;
}

TEST(EmuCublas, SgemmMatchesNaiveColumnMajorGemmForEveryOp) {
  Handle handle;
  const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C};
  const int sizes[][3] = {{7, 13, 33}, {33, 7, 13}, {1, 1, 1}, {13, 1, 5}, {1, 37, 3}};
  uint64_t seed = 1;
  for (cublasOperation_t ta : ops)
    for (cublasOperation_t tb : ops)
      for (const auto& s : sizes)
        for (int pad : {0, 3}) {
          const Gemm g{ta, tb, s[0], s[1], s[2], pad};
          const std::vector<float> a = randoms(g.a_size(), seed++), b = randoms(g.b_size(), seed++);
          std::vector<float> c = randoms(g.c_size(), seed++);
          const float alpha = 0.7f, beta = -1.3f;
          const std::vector<double> expected =
              naive_gemm(g, alpha, a.data(), b.data(), beta, c.data());
          ASSERT_EQ(cublasSgemm(handle.h, ta, tb, g.m, g.n, g.k, &alpha, a.data(), g.lda(),
                                b.data(), g.ldb(), &beta, c.data(), g.ldc()),
                    CUBLAS_STATUS_SUCCESS);
          EXPECT_TRUE(all_close(as_double(c), expected, 1e-5))
              << "ta " << ta << " tb " << tb << " m " << g.m << " n " << g.n << " k " << g.k
              << " pad " << pad;
        }
}

TEST(EmuCublas, StridedBatchedReusesAStrideZeroMatrixAndLeavesGapsAlone) {
  Handle handle;
  const Gemm g{CUBLAS_OP_T, CUBLAS_OP_N, 7, 13, 33, 2};
  const int batch = 3;
  // A: one matrix for every entry (stride 0). B and C: matrices with a gap between them.
  const long long stride_b = static_cast<long long>(g.b_size()) + 5;
  const long long stride_c = static_cast<long long>(g.c_size()) + 4;
  const std::vector<float> a = randoms(g.a_size(), 11), b = randoms(stride_b * batch, 12);
  std::vector<float> c = randoms(stride_c * batch, 13);
  const std::vector<float> c0 = c;
  const float alpha = 1.5f, beta = 0.5f;
  ASSERT_EQ(cublasSgemmStridedBatched(handle.h, g.ta, g.tb, g.m, g.n, g.k, &alpha, a.data(),
                                      g.lda(), 0, b.data(), g.ldb(), stride_b, &beta, c.data(),
                                      g.ldc(), stride_c, batch),
            CUBLAS_STATUS_SUCCESS);
  for (int i = 0; i < batch; ++i) {
    const size_t at = static_cast<size_t>(i * stride_c);
    const std::vector<double> expected =
        naive_gemm(g, alpha, a.data(), b.data() + i * stride_b, beta, c0.data() + at);
    const std::vector<float> got(c.begin() + at, c.begin() + at + g.c_size());
    EXPECT_TRUE(all_close(as_double(got), expected, 1e-5)) << "batch entry " << i;
    // The gap after each output is not touched.
    for (size_t j = at + g.c_size(); j < at + stride_c; ++j) EXPECT_EQ(c[j], c0[j]) << j;
  }
}

TEST(EmuCublas, BetaZeroNeverReadsCAndAlphaZeroOrEmptyKNeverReadsAB) {
  Handle handle;
  const Gemm g{CUBLAS_OP_N, CUBLAS_OP_T, 13, 7, 5, 0};
  std::vector<float> a = randoms(g.a_size(), 21), b = randoms(g.b_size(), 22);
  // beta == 0: NaN in C does not survive.
  std::vector<float> c(g.c_size(), kNaN);
  const float one = 1, zero = 0, two = 2;
  ASSERT_EQ(cublasSgemm(handle.h, g.ta, g.tb, g.m, g.n, g.k, &one, a.data(), g.lda(), b.data(),
                        g.ldb(), &zero, c.data(), g.ldc()),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<double> expected = naive_gemm(g, 1, a.data(), b.data(), 0, c.data());
  EXPECT_TRUE(all_close(as_double(c), expected, 1e-5));
  // alpha == 0: C = beta C, and NaN in A and B is not read.
  std::fill(a.begin(), a.end(), kNaN);
  std::vector<float> c2 = randoms(g.c_size(), 23);
  const std::vector<float> c2_before = c2;
  ASSERT_EQ(cublasSgemm(handle.h, g.ta, g.tb, g.m, g.n, g.k, &zero, a.data(), g.lda(), b.data(),
                        g.ldb(), &two, c2.data(), g.ldc()),
            CUBLAS_STATUS_SUCCESS);
  for (size_t i = 0; i < c2.size(); ++i) EXPECT_EQ(c2[i], 2 * c2_before[i]) << i;
  // k == 0: the product is empty, C = beta C (here beta == 0: zeros over NaN).
  std::vector<float> c3(g.c_size(), kNaN);
  ASSERT_EQ(cublasSgemm(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, g.m, g.n, 0, &one, a.data(), g.m,
                        b.data(), 1, &zero, c3.data(), g.ldc()),
            CUBLAS_STATUS_SUCCESS);
  for (float v : c3) EXPECT_EQ(v, 0.0f);
}

TEST(EmuCublas, EmptyProblemsSucceedWithoutTouchingC) {
  Handle handle;
  std::vector<float> a(64, 1), b(64, 1), c(64, kNaN);
  const float one = 1;
  EXPECT_EQ(cublasSgemm(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 0, 4, 4, &one, a.data(), 1, b.data(), 4,
                        &one, c.data(), 1),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSgemmStridedBatched(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.data(),
                                      4, 16, b.data(), 4, 16, &one, c.data(), 4, 16, 0),
            CUBLAS_STATUS_SUCCESS);
  for (float v : c) EXPECT_TRUE(std::isnan(v));
}

// Every argument cuBLAS rejects, and that a rejected call touches nothing.
TEST(EmuCublas, BadArgumentsReturnInvalidValueAsOnAGpu) {
  Handle handle;
  const Gemm g{CUBLAS_OP_N, CUBLAS_OP_N, 7, 13, 5, 0};  // lda >= 7, ldb >= 5, ldc >= 7
  std::vector<float> a(1024, 1), b(1024, 1), c(1024, 3);
  const float one = 1;
  auto call = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                  const float* alpha, int lda, int ldb, int ldc, int batch = 1) {
    return cublasSgemmStridedBatched(handle.h, ta, tb, m, n, k, alpha, a.data(), lda, 0, b.data(),
                                     ldb, 0, &one, c.data(), ldc, 0, batch);
  };
  const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  EXPECT_EQ(call(N, N, g.m, g.n, g.k, &one, 7, 5, 7), CUBLAS_STATUS_SUCCESS);
  std::fill(c.begin(), c.end(), 3.0f);
  const cublasStatus_t invalid = CUBLAS_STATUS_INVALID_VALUE;
  // Leading dimensions below the rows as stored: A is m x k (N) or k x m (T); B k x n or n x k.
  EXPECT_EQ(call(N, N, 7, 13, 5, &one, 6, 5, 7), invalid);
  EXPECT_EQ(call(T, N, 7, 13, 5, &one, 4, 5, 7), invalid);
  EXPECT_EQ(call(N, N, 7, 13, 5, &one, 7, 4, 7), invalid);
  EXPECT_EQ(call(N, T, 7, 13, 5, &one, 7, 12, 7), invalid);
  EXPECT_EQ(call(N, N, 7, 13, 5, &one, 7, 5, 6), invalid);
  EXPECT_EQ(call(N, N, 0, 13, 5, &one, 0, 5, 1), invalid);  // ld >= 1 even when m == 0
  // A wrong transpose flag: A holds op(A)^T (k x m, lda = k = 5) but is passed as N (lda >= m).
  EXPECT_EQ(call(N, N, 7, 13, 5, &one, 5, 5, 7), invalid);
  EXPECT_EQ(call(T, N, 7, 13, 5, &one, 5, 5, 7), CUBLAS_STATUS_SUCCESS);
  std::fill(c.begin(), c.end(), 3.0f);
  // An op flag that does not exist, negative sizes and batch count, a missing alpha.
  EXPECT_EQ(call(static_cast<cublasOperation_t>(3), N, 7, 13, 5, &one, 7, 5, 7), invalid);
  EXPECT_EQ(call(N, static_cast<cublasOperation_t>(-1), 7, 13, 5, &one, 7, 5, 7), invalid);
  EXPECT_EQ(call(N, N, -1, 13, 5, &one, 7, 5, 7), invalid);
  EXPECT_EQ(call(N, N, 7, -1, 5, &one, 7, 5, 7), invalid);
  EXPECT_EQ(call(N, N, 7, 13, -1, &one, 7, 5, 7), invalid);
  EXPECT_EQ(call(N, N, 7, 13, 5, &one, 7, 5, 7, -1), invalid);
  EXPECT_EQ(call(N, N, 7, 13, 5, nullptr, 7, 5, 7), invalid);
  for (float v : c) ASSERT_EQ(v, 3.0f) << "a rejected call wrote to C";
  // No handle.
  EXPECT_EQ(cublasSgemm(nullptr, N, N, 7, 13, 5, &one, a.data(), 7, b.data(), 5, &one, c.data(), 7),
            CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST(EmuCublas, HandlesStreamsAndStatusText) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  cudaStream_t s = reinterpret_cast<cudaStream_t>(0x10);
  EXPECT_EQ(cublasGetStream(h, &s), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(s, nullptr);  // the default stream
  EXPECT_EQ(cublasSetStream(h, reinterpret_cast<cudaStream_t>(0x20)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGetStream(h, &s), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(s, reinterpret_cast<cudaStream_t>(0x20));
  // a workspace must be 256-byte aligned, as on a GPU; none (null, 0 bytes) is the library's own
  alignas(256) static char workspace[512];
  EXPECT_EQ(cublasSetWorkspace(h, workspace, 512), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetWorkspace(h, workspace + 16, 256), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(h, nullptr, 256), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(h, nullptr, 0), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetWorkspace(nullptr, workspace, 512), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasCreate(nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasDestroy(nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasSetStream(nullptr, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_CONTAINS(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE), "invalid value");
  EXPECT_STREQ(cublasGetStatusName(static_cast<cublasStatus_t>(99)), "CUBLAS_STATUS_UNKNOWN");
}

}  // namespace
}  // namespace glass::emu_cublas_test

namespace glass::emu_cublas_test {
namespace {

// v rounded to bf16 (the values a bf16 matrix holds) and its bits.
std::vector<float> rounded_to_bf16(const std::vector<float>& v) {
  std::vector<float> out;
  for (float x : v) out.push_back(bf16::from_float(x).to_float());
  return out;
}
std::vector<uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(bf16::from_float(x).bits);
  return out;
}

// cublasGemmStridedBatchedEx with bf16 A and B against the naive double GEMM of the same (bf16)
// values: a f32 C agrees to f32 accumulation; a bf16 C is that result rounded once (at most 2^-8
// relative, on top), and every op combination, padded leading dimensions and batch strides
// (stride 0 for A) take the same path.
TEST(EmuCublas, GemmExBf16MatchesNaiveGemmOfTheBf16Values) {
  Handle handle;
  const cublasOperation_t ops[] = {CUBLAS_OP_N, CUBLAS_OP_T};
  uint64_t seed = 100;
  for (cublasOperation_t ta : ops)
    for (cublasOperation_t tb : ops)
      for (int pad : {0, 3}) {
        const Gemm g{ta, tb, 7, 13, 33, pad};
        const int batch = 2;
        const long long stride_b = static_cast<long long>(g.b_size()), stride_c = g.c_size();
        const std::vector<float> a = rounded_to_bf16(randoms(g.a_size(), seed++));
        const std::vector<float> b = rounded_to_bf16(randoms(stride_b * batch, seed++));
        const std::vector<float> c0 = rounded_to_bf16(randoms(stride_c * batch, seed++));
        const std::vector<uint16_t> a16 = bf16_bits(a), b16 = bf16_bits(b);
        const float alpha = 0.75f, beta = -0.5f;
        // bf16 C, and f32 C
        std::vector<uint16_t> c16 = bf16_bits(c0);
        std::vector<float> c32 = c0;
        ASSERT_EQ(cublasGemmStridedBatchedEx(
                      handle.h, ta, tb, g.m, g.n, g.k, &alpha, a16.data(), CUDA_R_16BF, g.lda(), 0,
                      b16.data(), CUDA_R_16BF, g.ldb(), stride_b, &beta, c16.data(), CUDA_R_16BF,
                      g.ldc(), stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                  CUBLAS_STATUS_SUCCESS);
        ASSERT_EQ(cublasGemmStridedBatchedEx(handle.h, ta, tb, g.m, g.n, g.k, &alpha, a16.data(),
                                             CUDA_R_16BF, g.lda(), 0, b16.data(), CUDA_R_16BF,
                                             g.ldb(), stride_b, &beta, c32.data(), CUDA_R_32F,
                                             g.ldc(), stride_c, batch, CUBLAS_COMPUTE_32F_PEDANTIC,
                                             CUBLAS_GEMM_DEFAULT_TENSOR_OP),
                  CUBLAS_STATUS_SUCCESS);
        for (int i = 0; i < batch; ++i) {
          const size_t at = static_cast<size_t>(i * stride_c);
          const std::vector<double> expected =
              naive_gemm(g, alpha, a.data(), b.data() + i * stride_b, beta, c0.data() + at);
          std::vector<double> got16, got32;
          for (size_t j = at; j < at + g.c_size(); ++j) {
            got16.push_back(bf16{c16[j]}.to_float());
            got32.push_back(c32[j]);
          }
          EXPECT_TRUE(all_close(got32, expected, 1e-5)) << "f32 C, ta " << ta << " tb " << tb;
          EXPECT_TRUE(all_close(got16, expected, 1.0 / 256)) << "bf16 C, ta " << ta << " tb " << tb;
          // Rounded once: the bf16 C is exactly the f32 C rounded to nearest even.
          for (size_t j = at; j < at + g.c_size(); ++j)
            ASSERT_EQ(c16[j], bf16::from_float(c32[j]).bits) << "element " << j;
        }
      }
}

// What cuBLAS rejects in the Ex calls, and what the emulation does not guess at.
TEST(EmuCublas, GemmExRejectsUnsupportedTypesAndBadArguments) {
  Handle handle;
  std::vector<uint16_t> a(1024, 0x3f80), b(1024, 0x3f80), c(1024, 0x4040);  // 1, 1, 3
  std::vector<float> a32(1024, 1);
  const float one = 1;
  auto call = [&](cudaDataType at, const void* ap, cudaDataType bt, cudaDataType ct,
                  cublasComputeType_t compute, int lda = 7,
                  cublasGemmAlgo_t algo = CUBLAS_GEMM_DEFAULT) {
    return cublasGemmEx(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 7, 13, 5, &one, ap, at, lda, b.data(),
                        bt, 5, &one, c.data(), ct, 7, compute, algo);
  };
  const cublasStatus_t unsupported = CUBLAS_STATUS_NOT_SUPPORTED;
  // A and B of different types; a bf16 product into f16; compute types that are not 32F.
  EXPECT_EQ(call(CUDA_R_32F, a32.data(), CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F), unsupported);
  EXPECT_EQ(call(CUDA_R_16BF, a.data(), CUDA_R_16BF, CUDA_R_16F, CUBLAS_COMPUTE_32F), unsupported);
  EXPECT_EQ(call(CUDA_R_16BF, a.data(), CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_16F), unsupported);
  EXPECT_EQ(call(CUDA_R_16BF, a.data(), CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_64F), unsupported);
  EXPECT_EQ(call(CUDA_R_16BF, a.data(), CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F_FAST_TF32),
            unsupported);
  // A leading dimension below the rows, an algorithm that does not exist.
  EXPECT_EQ(call(CUDA_R_16BF, a.data(), CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 6),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(CUDA_R_16BF, a.data(), CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 7,
                 static_cast<cublasGemmAlgo_t>(50)),
            CUBLAS_STATUS_INVALID_VALUE);
  for (uint16_t v : c) ASSERT_EQ(v, 0x4040) << "a rejected call wrote to C";
  // The same call with good arguments: 3 + 5 * (1 * 1) = 8.
  EXPECT_EQ(call(CUDA_R_16BF, a.data(), CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bf16{c[0]}.to_float(), 8.0f);
}

}  // namespace
}  // namespace glass::emu_cublas_test
