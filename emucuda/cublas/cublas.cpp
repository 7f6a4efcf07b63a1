// The emulated cuBLAS (cublas_v2.h): cuBLAS's argument checks, then the column-major GEMM handed
// to OpenBLAS with CblasColMajor, so that a call means on emu exactly what it means on a GPU.
//
// Nothing here knows about glass tensors: like the real library it sees sizes, leading
// dimensions and raw pointers, and emu device memory is host memory that OpenBLAS reads directly.
// The Ex calls with bf16 operands convert them exactly to f32 (compact column-major copies), run
// the same f32 GEMM, and round a bf16 C once (glass::bf16, round to nearest even).
#include "emucuda/cublas/cublas_v2.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <new>
#include <vector>

#include "engine/dtype.h"

#include "emucuda/cublas/stream_order.h"

struct cublasContext {
  cudaStream_t stream = nullptr;  // the default stream until cublasSetStream
  bool stream_ordered = false;    // GEMMs queued on `stream` of the emulated CUDA runtime
  cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;
};

namespace {

// The math mode of the handle of the last GEMM (glass_emu_cublasLastGemmMathMode).
std::atomic<int> g_last_gemm_math_mode{CUBLAS_DEFAULT_MATH};

bool is_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// For real matrices the conjugate transpose is the transpose.
CBLAS_TRANSPOSE to_cblas(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
}

// cuBLAS's checks for a GEMM, made before anything is read or written.
cublasStatus_t check_gemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                          int m, int n, int k, const void* alpha, int lda, int ldb,
                          const void* beta, int ldc, int batch_count) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!is_op(transa) || !is_op(transb) || m < 0 || n < 0 || k < 0 || batch_count < 0 ||
      alpha == nullptr || beta == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  // op(A) is m x k, so A is stored m x k, or k x m when transposed; a column-major matrix needs a
  // leading dimension of at least its row count. Likewise B (k x n) and C (m x n).
  const int a_rows = transa == CUBLAS_OP_N ? m : k;
  const int b_rows = transb == CUBLAS_OP_N ? k : n;
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  g_last_gemm_math_mode.store(handle->math_mode);
  return CUBLAS_STATUS_SUCCESS;
}

// C = beta C, column by column: what a GEMM with alpha == 0 or k == 0 reduces to. beta == 0
// writes zeros without reading C.
void scale(int m, int n, float beta, float* c, int ldc) {
  for (int j = 0; j < n; ++j) {
    float* col = c + static_cast<long long>(j) * ldc;
    if (beta == 0.0f)
      std::fill(col, col + m, 0.0f);
    else
      for (int i = 0; i < m; ++i) col[i] *= beta;
  }
}

// Each status's name and what it means.
struct StatusText {
  cublasStatus_t status;
  const char* name;
  const char* text;
};

constexpr StatusText kStatusTexts[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED",
     "the library was not initialized (no handle)"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "a resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE",
     "an invalid value was used as an argument (a size, leading dimension, op flag, batch count "
     "or missing scalar)"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH",
     "the device architecture is not supported"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR",
     "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED",
     "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED",
     "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR", "a licensing error occurred"},
};

// The Ex calls' element and compute types: what cuBLAS supports of them, and the emulation does
// (see cublas_v2.h).
cublasStatus_t check_types(cudaDataType a, cudaDataType b, cudaDataType c,
                           cublasComputeType_t compute) {
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (a != b) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (a == CUDA_R_32F && c == CUDA_R_32F) return CUBLAS_STATUS_SUCCESS;
  if (a == CUDA_R_16BF && (c == CUDA_R_16BF || c == CUDA_R_32F)) return CUBLAS_STATUS_SUCCESS;
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

bool is_algo(cublasGemmAlgo_t algo) {
  return (algo >= CUBLAS_GEMM_DEFAULT && algo <= CUBLAS_GEMM_ALGO23) ||
         (algo >= CUBLAS_GEMM_DEFAULT_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
}

// A column-major rows x cols matrix of `type` at p (leading dimension ld) as a compact f32 matrix
// (leading dimension rows): exact for bf16 and f32.
std::vector<float> to_f32(const void* p, cudaDataType type, int rows, int cols, int ld) {
  std::vector<float> out(static_cast<size_t>(rows) * cols);
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i) {
      const long long at = static_cast<long long>(j) * ld + i;
      out[static_cast<size_t>(j) * rows + i] =
          type == CUDA_R_16BF ? glass::bf16{static_cast<const uint16_t*>(p)[at]}.to_float()
                              : static_cast<const float*>(p)[at];
    }
  return out;
}

const StatusText* find_status(cublasStatus_t status) {
  for (const StatusText& s : kStatusTexts)
    if (s.status == status) return &s;
  return nullptr;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new (std::nothrow) cublasContext;
  return *handle == nullptr ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t glass_emu_cublasCreateStreamOrdered(cublasHandle_t* handle) {
  const cublasStatus_t status = cublasCreate(handle);
  if (status == CUBLAS_STATUS_SUCCESS) (*handle)->stream_ordered = true;
  return status;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0 || (workspace == nullptr && bytes != 0))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;  // the host products need no workspace: nothing to keep
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const int base = mode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  if (base < CUBLAS_DEFAULT_MATH || base > CUBLAS_TF32_TENSOR_OP_MATH)
    return CUBLAS_STATUS_INVALID_VALUE;
  handle->math_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (mode == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *mode = handle->math_mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasMath_t glass_emu_cublasLastGemmMathMode(void) {
  return static_cast<cublasMath_t>(g_last_gemm_math_mode.load());
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  const StatusText* found = find_status(status);
  return found ? found->name : "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  const StatusText* found = find_status(status);
  return found ? found->text : "unknown status";
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc) {
  return cublasSgemmStridedBatched(handle, transa, transb, m, n, k, alpha, A, lda, 0, B, ldb, 0,
                                   beta, C, ldc, 0, 1);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb,
                                         long long int strideB, const float* beta, float* C,
                                         int ldc, long long int strideC, int batchCount) {
  const cublasStatus_t status =
      check_gemm(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, batchCount);
  if (status != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return status;
  // One matrix after another; OpenBLAS threads each call.
  auto gemm = [=, alpha = *alpha, beta = *beta] {
    for (int i = 0; i < batchCount; ++i) {
      float* c = C + i * strideC;
      if (alpha == 0.0f || k == 0)
        scale(m, n, beta, c, ldc);
      else
        cblas_sgemm(CblasColMajor, to_cblas(transa), to_cblas(transb), m, n, k, alpha,
                    A + i * strideA, lda, B + i * strideB, ldb, beta, c, ldc);
    }
  };
  return glass::emu::cublas::run_in_stream_order(handle->stream_ordered, handle->stream,
                                                 "cublasSgemmStridedBatched",
                                                 {{A, false}, {B, false}, {C, true}}, gemm);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B,
                                    Btype, ldb, 0, beta, C, Ctype, ldc, 0, 1, computeType, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  cublasStatus_t status =
      check_gemm(handle, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc, batchCount);
  if (status == CUBLAS_STATUS_SUCCESS && !is_algo(algo)) status = CUBLAS_STATUS_INVALID_VALUE;
  if (status == CUBLAS_STATUS_SUCCESS) status = check_types(Atype, Btype, Ctype, computeType);
  if (status != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return status;
  // The 32F compute types scale by float.
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  if (Atype == CUDA_R_32F)  // all f32: the SGEMM itself
    return cublasSgemmStridedBatched(handle, transa, transb, m, n, k, &a,
                                     static_cast<const float*>(A), lda, strideA,
                                     static_cast<const float*>(B), ldb, strideB, &b,
                                     static_cast<float*>(C), ldc, strideC, batchCount);
  const size_t a_size = Atype == CUDA_R_16BF ? 2 : 4, c_size = Ctype == CUDA_R_16BF ? 2 : 4;
  const int a_rows = transa == CUBLAS_OP_N ? m : k, a_cols = transa == CUBLAS_OP_N ? k : m;
  const int b_rows = transb == CUBLAS_OP_N ? k : n, b_cols = transb == CUBLAS_OP_N ? n : k;
  // Run in stream order like the SGEMM (stream_order.h): the host must not read A, B or C before
  // the work queued ahead of it has run.
  auto gemm = [=] {
    for (int i = 0; i < batchCount; ++i) {
      // 1. A and B as compact f32 matrices (exact), and C as f32 when it is bf16 (read only when
      //    beta != 0, as cuBLAS reads it)
      const auto* a_i = static_cast<const char*>(A) + i * strideA * static_cast<long long>(a_size);
      const auto* b_i = static_cast<const char*>(B) + i * strideB * static_cast<long long>(a_size);
      char* c_i = static_cast<char*>(C) + i * strideC * static_cast<long long>(c_size);
      const bool product = a != 0.0f && k > 0;  // else A and B are not read
      const std::vector<float> fa =
          product ? to_f32(a_i, Atype, a_rows, a_cols, lda) : std::vector<float>();
      const std::vector<float> fb =
          product ? to_f32(b_i, Btype, b_rows, b_cols, ldb) : std::vector<float>();
      std::vector<float> fc;
      float* c = reinterpret_cast<float*>(c_i);
      int c_ld = ldc;
      if (Ctype == CUDA_R_16BF) {
        fc = b == 0.0f ? std::vector<float>(static_cast<size_t>(m) * n)
                       : to_f32(c_i, Ctype, m, n, ldc);
        c = fc.data();
        c_ld = m;
      }
      // 2. C = alpha op(A) op(B) + beta C in f32
      if (!product)
        scale(m, n, b, c, c_ld);
      else
        cblas_sgemm(CblasColMajor, to_cblas(transa), to_cblas(transb), m, n, k, a, fa.data(),
                    std::max(1, a_rows), fb.data(), std::max(1, b_rows), b, c, c_ld);
      // 3. a bf16 C: each element rounded once
      if (Ctype == CUDA_R_16BF)
        for (int j = 0; j < n; ++j)
          for (int r = 0; r < m; ++r)
            reinterpret_cast<uint16_t*>(c_i)[static_cast<long long>(j) * ldc + r] =
                glass::bf16::from_float(fc[static_cast<size_t>(j) * m + r]).bits;
    }
  };
  return glass::emu::cublas::run_in_stream_order(handle->stream_ordered, handle->stream,
                                                 "cublasGemmStridedBatchedEx",
                                                 {{A, false}, {B, false}, {C, true}}, gemm);
}

}  // extern "C"
