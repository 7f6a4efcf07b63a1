// The math settings that decide how a GEMM's parts are added: cuBLAS's math mode
// (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) and cuBLASLt's
// CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, checked and kept as the real libraries check and keep
// them. The emulated libraries always add in f32; tests/emu_cublas/test_reduction_precision.cpp
// checks that glass's GEMMs ask for it, through what these settings record.
#include <gtest/gtest.h>

#include <cstdint>

#include "emucuda/cublas/cublasLt.h"
#include "emucuda/cublas/cublas_v2.h"

namespace glass::emu_cublas_test {
namespace {

TEST(EmuCublasMathMode, IsCheckedAndKeptAsCublasDoes) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasMath_t mode = CUBLAS_TF32_TENSOR_OP_MATH;
  ASSERT_EQ(cublasGetMathMode(handle, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_DEFAULT_MATH);
  EXPECT_EQ(cublasSetMathMode(handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasGetMathMode(handle, &mode), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mode, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  EXPECT_EQ(cublasSetMathMode(handle, static_cast<cublasMath_t>(CUBLAS_PEDANTIC_MATH | 16)),
            CUBLAS_STATUS_SUCCESS);
  // not a base mode, or an unknown flag
  EXPECT_EQ(cublasSetMathMode(handle, static_cast<cublasMath_t>(4)), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetMathMode(handle, static_cast<cublasMath_t>(32)), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasGetMathMode(handle, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetMathMode(nullptr, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

TEST(EmuCublasLtReductionScheme, MaskIsCheckedAsCublasLtDoes) {
  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  const uint32_t compute = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE, unknown = 8;
  const uint64_t wide = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &compute, sizeof(compute)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &unknown, sizeof(unknown)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                 &wide, sizeof(wide)),
            CUBLAS_STATUS_INVALID_VALUE);  // a uint32_t attribute
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace glass::emu_cublas_test
