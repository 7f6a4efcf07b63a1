// The emulated cuBLAS: the part of <cublas_v2.h> that kernels/cuda calls, with the same names,
// signatures, enum values and status codes, answered on the host by OpenBLAS (cublas.cpp).
//
// A .cu file includes it in place of the real header when compiled for emu:
//   #if defined(GLASS_EMU)
//   #include "emucuda/cublas/cublas_v2.h"
//   #else
//   #include <cublas_v2.h>
//   #endif
// and the call site stays byte for byte the one a GPU runs. The semantics are cuBLAS's:
// - matrices are column-major; op(X) is X (CUBLAS_OP_N) or its transpose (CUBLAS_OP_T, and
//   CUBLAS_OP_C, which means the same for real types);
// - arguments are checked as cuBLAS checks them, before anything is touched: a null handle is
//   CUBLAS_STATUS_NOT_INITIALIZED; a negative size or batch count, an unknown op flag, a null
//   alpha or beta, or a leading dimension below the rows of the matrix as stored
//   (lda < max(1, transa == N ? m : k), ldb < max(1, transb == N ? k : n), ldc < max(1, m)) is
//   CUBLAS_STATUS_INVALID_VALUE;
// - alpha and beta are read through host pointers (CUBLAS_POINTER_MODE_HOST, cuBLAS's default);
//   with beta == 0, C is written without being read, so NaN in C does not survive; with
//   alpha == 0 or k == 0, A and B are not read and C = beta C.
// On the emu device calls are synchronous: the stream set on a handle is kept (cublasGetStream
// returns it) and otherwise has no effect, since emu streams are always drained. For `cuda` on the
// emulated CUDA runtime (GLASS_CUDA_RUNTIME_EMU) kernels/cuda/gemm.cu makes its handles with
// glass_emu_cublasCreateStreamOrdered: a GEMM is queued on the handle's stream at the call (alpha
// and beta read then, as cuBLAS reads host scalars) and runs in order with the kernels around it.
// - the mixed-precision entry points (cublasGemmEx, cublasGemmStridedBatchedEx) take the element
//   types of A, B and C (cudaDataType, from the CUDA headers) and a compute type: the emulation
//   answers CUBLAS_COMPUTE_32F(_PEDANTIC) with A, B and C all CUDA_R_32F, or A and B CUDA_R_16BF
//   and C CUDA_R_16BF or CUDA_R_32F, alpha and beta float, as cuBLAS's table of supported
//   combinations has them: bf16 inputs are converted exactly, products are summed in f32, and a
//   bf16 C is rounded once, to nearest even. A combination cuBLAS does not support (A and B of
//   different types, a compute type that does not fit the data types) is
//   CUBLAS_STATUS_NOT_SUPPORTED; one cuBLAS supports and the emulation does not (f16, int8,
//   complex, other compute types) is CUBLAS_STATUS_NOT_SUPPORTED too, never a guess; an unknown
//   algorithm is CUBLAS_STATUS_INVALID_VALUE.
// Calls are synchronous. The stream set on a handle is kept (cublasGetStream returns it) and
// otherwise has no effect: on emu every stream is an in-order queue that is always drained.
#pragma once

#include <driver_types.h>   // cudaStream_t, from the CUDA headers as they are
#include <library_types.h>  // cudaDataType (CUDA_R_32F, CUDA_R_16BF, ...)

// The real library's symbols stay free: a program with both devices links this emulation (for
// gemm.cu's emu build) and libcublas (for its nvcc build), and each call must reach its own. So,
// as the real header maps cublasCreate to cublasCreate_v2, these names are macros for symbols of
// the emulator's own; the call sites are unchanged.
#define cublasContext glass_emu_cublasContext
#define cublasCreate glass_emu_cublasCreate
#define cublasDestroy glass_emu_cublasDestroy
#define cublasSetStream glass_emu_cublasSetStream
#define cublasGetStream glass_emu_cublasGetStream
#define cublasSetWorkspace glass_emu_cublasSetWorkspace
#define cublasSetMathMode glass_emu_cublasSetMathMode
#define cublasGetMathMode glass_emu_cublasGetMathMode
#define cublasGetStatusName glass_emu_cublasGetStatusName
#define cublasGetStatusString glass_emu_cublasGetStatusString
#define cublasSgemm glass_emu_cublasSgemm
#define cublasSgemmStridedBatched glass_emu_cublasSgemmStridedBatched
#define cublasGemmEx glass_emu_cublasGemmEx
#define cublasGemmStridedBatchedEx glass_emu_cublasGemmStridedBatchedEx

extern "C" {

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

// The compute types of the Ex calls, with cuBLAS's values.
typedef enum {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_16F_PEDANTIC = 65,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73
} cublasComputeType_t;

// The algorithm of the Ex calls: the default (heuristic) one, CUBLAS_GEMM_ALGO0..23, and the
// tensor-op ones 99..115; every valid value computes the same product here.
typedef enum {
  CUBLAS_GEMM_DEFAULT = -1,
  CUBLAS_GEMM_ALGO0 = 0,
  CUBLAS_GEMM_ALGO23 = 23,
  CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99,
  CUBLAS_GEMM_ALGO15_TENSOR_OP = 115
} cublasGemmAlgo_t;

// The math mode of a handle (cublasSetMathMode), cuBLAS's values: a base mode, optionally with
// CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, which keeps every reduction (split-K partial
// sums among them) in the compute type: with bf16 output and CUBLAS_COMPUTE_32F, sums stay f32.
// The emulation always sums in f32; it checks the value and remembers it (see below).
typedef enum {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
} cublasMath_t;
// A handle: what the library keeps per context (here the stream and the math mode).
typedef struct cublasContext* cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
// cublasCreate for `cuda` on the emulated CUDA runtime: its GEMMs queue on the handle's stream.
cublasStatus_t glass_emu_cublasCreateStreamOrdered(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream);
// A workspace of the caller's for the handle's GEMMs. The host products need none, so it is only
// checked (aligned to 256 bytes, or INVALID_VALUE as on a GPU) and not kept.
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes);

// A base mode, alone or with CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION; anything else is
// CUBLAS_STATUS_INVALID_VALUE, as in cuBLAS.
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode);
// For tests that the caller asked for f32 reductions: the math mode of the handle that ran the
// last GEMM (any entry point) in this process; CUBLAS_DEFAULT_MATH before any.
cublasMath_t glass_emu_cublasLastGemmMathMode(void);
// "CUBLAS_STATUS_INVALID_VALUE", and a sentence saying what it means.
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

// C = alpha op(A) op(B) + beta C, column-major; op(A) is m x k, op(B) is k x n, C is m x n.
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float* alpha,
                           const float* A, int lda, const float* B, int ldb, const float* beta,
                           float* C, int ldc);

// The same for batchCount matrices: matrix i of X starts at X + i * strideX (a stride of 0 reuses
// one matrix for every entry).
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb,
                                         long long int strideB, const float* beta, float* C,
                                         int ldc, long long int strideC, int batchCount);

// C = alpha op(A) op(B) + beta C with A, B and C of the given element types and the sums in
// computeType; alpha and beta point to the compute type's scale type (float for the 32F types).
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);

// The same for batchCount matrices `stride` elements apart.
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B,
                                          cudaDataType Btype, int ldb, long long int strideB,
                                          const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo);

}  // extern "C"
