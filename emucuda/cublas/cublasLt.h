// The emulated cuBLASLt: the part of <cublasLt.h> that kernels/cuda/gemm_lt.cu calls, with the
// same names, signatures, enum values and status codes, answered on the host (cublaslt.cpp).
//
// A .cu file includes it in place of the real header when compiled for emu, exactly as it does
// the emulated cublas_v2.h, and the call site stays the one a GPU runs. The semantics are
// cuBLASLt's, column-major throughout:
//   D = epilogue(alpha op(A) op(B) + beta C),  op(A) m x k, op(B) k x n, C and D m x n
// with A, B, C and D described by matrix layouts (type, rows, cols, ld, batch count and stride)
// and the operation by a matmul descriptor (compute type, transposes, epilogue, bias and aux
// buffers). The epilogues (D's rows are i, its columns j; pre is the value before the epilogue):
//   DEFAULT        D = pre
//   BIAS           D = pre + bias[i]                       (bias: one value per row of D)
//   GELU           D = gelu(pre)
//   GELU_BIAS      D = gelu(pre + bias[i])
//   GELU_AUX       aux = pre, D = gelu(pre)                 (aux: m x n, leading dim AUX_LD)
//   GELU_AUX_BIAS  aux = pre + bias[i], D = gelu(aux)
//   DGELU          D = pre * gelu'(aux)                     (aux: the GELU input saved forward)
//   DGELU_BGRAD    the same, and bias[i] = sum over j of D[i][j]   (bias is an output)
//   BGRADA         D = pre, and bias[i] = sum over l of op(A)[i][l]  (reduction over k)
//   BGRADB         D = pre, and bias[j] = sum over l of op(B)[l][j]
// gelu is the tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in f32.
//
// Types: A and B are CUDA_R_32F or CUDA_R_16BF (both the same); C and D the same type as each
// other, f32 or (with bf16 inputs) bf16; the scale type (alpha, beta) is CUDA_R_32F; bias and aux
// have D's type (their DATA_TYPE attributes may only restate it). Compute CUBLAS_COMPUTE_32F
// multiplies and accumulates in f32 (bf16 values widen exactly); CUBLAS_COMPUTE_32F_FAST_TF32,
// f32 data only, first rounds each element of A and B to TF32 (10 explicit mantissa bits, round
// to nearest): the precision tensor cores give. Results are rounded to D's type once, at the end
// (bf16: round to nearest even). Bias gradients are summed in double and rounded once.
//
// Checked as the library checks, before anything is touched (CUBLAS_STATUS_INVALID_VALUE unless
// it says otherwise): null handles and descriptors (NOT_INITIALIZED for the handle), a set
// attribute with the wrong size for its type, sizes that do not fit (op(A), op(B), C and D must
// agree on m, n, k), ld < rows, batch counts that differ, an in-place C == D with another ld,
// a missing bias or aux pointer for an epilogue that uses it, an aux ld below m or not a multiple
// of 8, and an algorithm that did not come from cublasLtMatmulAlgoGetHeuristic or needs more
// workspace than given. What the emulation does not implement is CUBLAS_STATUS_NOT_SUPPORTED,
// never a guess: layout orders other than CUBLASLT_ORDER_COL, other types and compute types,
// device pointer modes, TRANSC, and the ReLU epilogues.
// On the emu device calls are synchronous and the stream argument is otherwise ignored, as in the
// emulated cuBLAS. For `cuda` on the emulated CUDA runtime (GLASS_CUDA_RUNTIME_EMU)
// kernels/cuda/gemm_lt.cu makes its handles with glass_emu_cublasLtCreateStreamOrdered:
// cublasLtMatmul checks its arguments at the call, copies the descriptors, alpha and beta (as the
// library reads them then) and queues the product on its stream, in order with the kernels around
// it.
#pragma once

#include <library_types.h>  // cudaDataType_t, from the CUDA headers as they are
#include <stddef.h>
#include <stdint.h>

#include "emucuda/cublas/cublas_v2.h"

// Macros for the emulator's own symbols, so the real libcublasLt stays free (cublas_v2.h says why).
#define cublasLtContext glass_emu_cublasLtContext
#define cublasLtMatmulDescOpaque glass_emu_cublasLtMatmulDescOpaque
#define cublasLtMatrixLayoutOpaque glass_emu_cublasLtMatrixLayoutOpaque
#define cublasLtMatmulPreferenceOpaque glass_emu_cublasLtMatmulPreferenceOpaque
#define cublasLtCreate glass_emu_cublasLtCreate
#define cublasLtDestroy glass_emu_cublasLtDestroy
#define cublasLtMatmulDescCreate glass_emu_cublasLtMatmulDescCreate
#define cublasLtMatmulDescDestroy glass_emu_cublasLtMatmulDescDestroy
#define cublasLtMatmulDescSetAttribute glass_emu_cublasLtMatmulDescSetAttribute
#define cublasLtMatrixLayoutCreate glass_emu_cublasLtMatrixLayoutCreate
#define cublasLtMatrixLayoutDestroy glass_emu_cublasLtMatrixLayoutDestroy
#define cublasLtMatrixLayoutSetAttribute glass_emu_cublasLtMatrixLayoutSetAttribute
#define cublasLtMatmulPreferenceCreate glass_emu_cublasLtMatmulPreferenceCreate
#define cublasLtMatmulPreferenceDestroy glass_emu_cublasLtMatmulPreferenceDestroy
#define cublasLtMatmulPreferenceSetAttribute glass_emu_cublasLtMatmulPreferenceSetAttribute
#define cublasLtMatmulAlgoGetHeuristic glass_emu_cublasLtMatmulAlgoGetHeuristic
#define cublasLtMatmul glass_emu_cublasLtMatmul

extern "C" {

typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque* cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque* cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque* cublasLtMatmulPreference_t;

// An algorithm as the heuristic returns it (semi-opaque, trivially copyable, as in the library).
typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

typedef enum {
  CUBLASLT_ORDER_COL = 0,
  CUBLASLT_ORDER_ROW = 1,
  CUBLASLT_ORDER_COL32 = 2,
  CUBLASLT_ORDER_COL4_4R2_8C = 3,
  CUBLASLT_ORDER_COL32_2R_4R4 = 4
} cublasLtOrder_t;

typedef enum {
  CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                  // uint32_t (cudaDataType)
  CUBLASLT_MATRIX_LAYOUT_ORDER = 1,                 // int32_t, CUBLASLT_ORDER_COL only
  CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                  // uint64_t
  CUBLASLT_MATRIX_LAYOUT_COLS = 3,                  // uint64_t
  CUBLASLT_MATRIX_LAYOUT_LD = 4,                    // int64_t
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,           // int32_t, default 1
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,  // int64_t, elements, default 0
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
  CUBLASLT_POINTER_MODE_HOST = 0,
  CUBLASLT_POINTER_MODE_DEVICE = 1
} cublasLtPointerMode_t;

typedef enum {
  CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,                // int32_t (cublasComputeType_t)
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,                  // int32_t (cudaDataType)
  CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,                // int32_t, HOST only
  CUBLASLT_MATMUL_DESC_TRANSA = 3,                      // int32_t (cublasOperation_t)
  CUBLASLT_MATMUL_DESC_TRANSB = 4,                      // int32_t
  CUBLASLT_MATMUL_DESC_TRANSC = 5,                      // int32_t, CUBLAS_OP_N only
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,                    // uint32_t (cublasLtEpilogue_t)
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,                // void*
  CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,          // int64_t, elements, default 0
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,       // void*
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,            // int64_t, elements
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,  // int64_t, elements, default 0
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,     // int32_t, default -1 (D's type)
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,             // int32_t, default -1 (D's type)
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_RELU_AUX = 2 | 128,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_RELU_BIAS = 2 | 4,
  CUBLASLT_EPILOGUE_RELU_AUX_BIAS = 2 | 128 | 4,
  CUBLASLT_EPILOGUE_DRELU = 8 | 128,
  CUBLASLT_EPILOGUE_DRELU_BGRAD = 8 | 128 | 16,
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
  CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
  CUBLASLT_EPILOGUE_DGELU = 64 | 128,
  CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16,
  CUBLASLT_EPILOGUE_BGRADA = 256,
  CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;

typedef enum {
  CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,          // uint32_t, accepted
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,  // uint64_t, default 0
  // uint32_t, cublasLtReductionScheme_t bits, default CUBLASLT_REDUCTION_SCHEME_MASK (all): the
  // split-K reductions the chosen algorithm may use; bits outside the mask are INVALID_VALUE
  CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
  // uint32_t, default 256 each: the alignment in bytes the chosen algorithm may assume of the
  // pointers (and batch strides) of A, B, C and D; cublasLtMatmul refuses data that lacks it
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;

// How an algorithm that splits K may add the parts (cuBLASLt's values): INPLACE and OUTPUT_TYPE
// add them in the output type (bf16 for a bf16 D), COMPUTE_TYPE in the compute type (f32). A
// preference mask of CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE keeps the sums in f32.
typedef enum {
  CUBLASLT_REDUCTION_SCHEME_NONE = 0,
  CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
  CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
  CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
  CUBLASLT_REDUCTION_SCHEME_MASK = 7
} cublasLtReductionScheme_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
// cublasLtCreate for `cuda` on the emulated CUDA runtime: cublasLtMatmul queues on its stream.
cublasStatus_t glass_emu_cublasLtCreateStreamOrdered(cublasLtHandle_t* handle);
// For tests of a caller's fallback: from now on the heuristic finds no algorithm (returns success
// with *return_count = 0, as the real library does for a combination it has no kernel for) for
// problems with this epilogue; CUBLASLT_EPILOGUE_DEFAULT clears it. Process-wide.
void glass_emu_cublasLtFindNoAlgorithmFor(cublasLtEpilogue_t epilogue);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
// For tests that the caller kept the reductions in f32: the reduction scheme mask that the
// algorithm of the last successful cublasLtMatmul in this process was chosen under
// (CUBLASLT_REDUCTION_SCHEME_MASK for a call without an algorithm, and before any call). The
// emulation always adds in f32; the mask only says what a GPU would have been allowed.
uint32_t glass_emu_cublasLtLastMatmulReductionSchemeMask(void);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size_in_bytes);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size_in_bytes);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size_in_bytes);

// Checks the problem as cublasLtMatmul would and, when it is valid, returns one algorithm
// (*return_count = 1) that needs no workspace and assumes the preference's alignments; an invalid
// problem returns its status and *return_count = 0.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
    cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int* return_count);

// alpha and beta are host pointers to floats (the scale type). algo may be null (the library
// then chooses, as the heuristic would). With an algorithm, a pointer (or batch stride) less
// aligned than the heuristic was told is refused with CUBLAS_STATUS_INVALID_VALUE and a line on
// stderr, where a GPU kernel might fault with a misaligned address.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t a_desc, const void* B,
                              cublasLtMatrixLayout_t b_desc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t c_desc, void* D, cublasLtMatrixLayout_t d_desc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);

}  // extern "C"
