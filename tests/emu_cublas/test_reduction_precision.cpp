// "Summed in f32" must hold for every GEMM the engine runs, split-K included: a GPU's cuBLAS may
// add the parts of a split-K bf16 GEMM in bf16 unless the handle's math mode has
// CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, and cuBLASLt may (INPLACE and OUTPUT_TYPE
// schemes) unless the preference's CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK is COMPUTE_TYPE.
// The emulated libraries always add in f32, so what these tests check is that the engine asks for
// it: the emulation checks both settings as the real libraries do
// (emucuda/tests/cublas/test_reduction_settings.cpp), and records what the last GEMM ran under
// (glass_emu_cublasLastGemmMathMode, glass_emu_cublasLtLastMatmulReductionSchemeMask).
#include "emucuda/cublas/cublasLt.h"
#include "emucuda/cublas/cublas_v2.h"
#include "engine/dtype.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/emu_cublas/emu_cublas_test.h"

namespace glass::emu_cublas_test {
namespace {

// n random values as a bf16 tensor on emu.
Tensor bf16_randoms(int64_t n, uint64_t seed, const Shape& shape) {
  std::vector<bf16> v;
  for (float x : randoms(static_cast<size_t>(n), seed)) v.push_back(bf16::from_float(x));
  return Tensor::from_host(v.data(), shape, DType::bf16, kEmu);
}

// A bf16 GEMM C [m, n] = A [m, k] B [k, n] on emu.
kernels::GemmArgs bf16_gemm(int64_t m, int64_t n, int64_t k) {
  kernels::GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.lda = k, g.ldb = n, g.ldc = n;
  g.a = bf16_randoms(m * k, 1, {m, k});
  g.b = bf16_randoms(k * n, 2, {k, n});
  g.c = bf16_randoms(m * n, 3, {m, n});
  return g;
}

TEST(EngineGemm, CublasGemmsRunWithReducedPrecisionReductionDisallowed) {
  kernels::cuda::gemm(bf16_gemm(8, 12, 40));
  EXPECT_NE(glass_emu_cublasLastGemmMathMode() & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION,
            0);
}

TEST(EngineGemm, CublasLtGemmsReduceInTheComputeType) {
  kernels::GemmArgs g = bf16_gemm(8, 12, 40);
  g.bias = bf16_randoms(12, 4, {12});  // with a bias, gemm() calls cuBLASLt
  kernels::cuda::gemm(g);
  EXPECT_EQ(glass_emu_cublasLtLastMatmulReductionSchemeMask(),
            uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});
}

}  // namespace
}  // namespace glass::emu_cublas_test
