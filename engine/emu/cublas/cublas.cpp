// The emulated cuBLAS (cublas_v2.h): cuBLAS's argument checks, then the column-major GEMM handed
// to OpenBLAS with CblasColMajor, so that a call means on emu exactly what it means on a GPU.
//
// Nothing here knows about glass tensors: like the real library it sees sizes, leading
// dimensions and raw pointers, and emu device memory is host memory that OpenBLAS reads directly.
#include "engine/emu/cublas/cublas_v2.h"

#include <cblas.h>

#include <algorithm>
#include <new>

#include "engine/emu/runtime/runtime.h"

struct cublasContext {
  cudaStream_t stream = nullptr;  // the default stream until cublasSetStream
  bool stream_ordered = false;    // GEMMs queued on `stream` of the emulated CUDA runtime
};

namespace {

bool is_op(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

// For real matrices the conjugate transpose is the transpose.
CBLAS_TRANSPOSE to_cblas(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
}

// cuBLAS's checks for a GEMM, made before anything is read or written.
cublasStatus_t check_gemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                          int m, int n, int k, const float* alpha, int lda, int ldb,
                          const float* beta, int ldc, int batch_count) {
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
  if (!handle->stream_ordered) {
    gemm();
    return CUBLAS_STATUS_SUCCESS;
  }
  const cudaError_t queued = glass::emu::runtime::enqueue(
      handle->stream, "cublasSgemmStridedBatched", {{A, false}, {B, false}, {C, true}}, gemm);
  return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // extern "C"
