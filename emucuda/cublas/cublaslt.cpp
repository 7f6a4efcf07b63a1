// The emulated cuBLASLt (cublasLt.h): the library's argument checks, then the column-major
// product in f32 through OpenBLAS (inputs widened from bf16, or rounded to TF32, first) and the
// epilogue applied element by element on the host, so a call means on emu what it means on a GPU.
//
// Like the real library it sees sizes, leading dimensions and raw pointers, never glass tensors.
#include <cblas.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "emucuda/cublas/cublasLt.h"
#include "emucuda/cublas/stream_order.h"
#include "engine/dtype.h"  // bf16: the storage type and its round-to-nearest-even conversion

struct cublasLtContext {
  bool stream_ordered = false;  // products queued on the stream of the emulated CUDA runtime
};

struct cublasLtMatmulDescOpaque {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_type = CUDA_R_32F;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  int64_t bias_batch_stride = 0;
  int32_t bias_type = -1;  // -1: D's type
  void* aux = nullptr;
  int64_t aux_ld = 0, aux_batch_stride = 0;
  int32_t aux_type = -1;
};

struct cublasLtMatrixLayoutOpaque {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batch_stride = 0;
};

struct cublasLtMatmulPreferenceOpaque {
  uint64_t max_workspace = 0;
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D in bytes: cuBLASLt's default
  uint32_t reduction_scheme_mask = CUBLASLT_REDUCTION_SCHEME_MASK;  // every scheme allowed
};

namespace {

// Tags the algorithm the heuristic hands out, so cublasLtMatmul can tell it from garbage.
constexpr uint64_t kAlgoTag = 0x676c6173734c7401ull;  // "glassLt" 1

constexpr cublasStatus_t kInvalid = CUBLAS_STATUS_INVALID_VALUE;
constexpr cublasStatus_t kNotSupported = CUBLAS_STATUS_NOT_SUPPORTED;

// An attribute value of type T, read only when the caller's size is T's (else INVALID_VALUE).
template <class T>
bool read_attr(const void* buf, size_t size, T* out) {
  if (buf == nullptr || size != sizeof(T)) return false;
  std::memcpy(out, buf, sizeof(T));
  return true;
}

bool is_op(int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }
bool is_type(int32_t t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }

size_t type_size(cudaDataType_t t) { return t == CUDA_R_16BF ? 2 : 4; }

// What each epilogue does, from its bits.
struct EpilogueParts {
  bool known = false;
  bool bias_in = false;  // adds bias[i]
  bool gelu = false;     // D = gelu(pre)
  bool aux_out = false;  // aux = pre (GELU input)
  bool dgelu = false;    // D = pre * gelu'(aux)
  bool bgrad_d = false;  // bias[i] = sum_j D[i][j]
  bool bgrad_a = false;  // bias[i] = sum_l op(A)[i][l]
  bool bgrad_b = false;  // bias[j] = sum_l op(B)[l][j]
};

EpilogueParts parts_of(uint32_t e) {
  EpilogueParts p;
  p.known = true;
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT:
      break;
    case CUBLASLT_EPILOGUE_BIAS:
      p.bias_in = true;
      break;
    case CUBLASLT_EPILOGUE_GELU:
      p.gelu = true;
      break;
    case CUBLASLT_EPILOGUE_GELU_BIAS:
      p.gelu = p.bias_in = true;
      break;
    case CUBLASLT_EPILOGUE_GELU_AUX:
      p.gelu = p.aux_out = true;
      break;
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
      p.gelu = p.aux_out = p.bias_in = true;
      break;
    case CUBLASLT_EPILOGUE_DGELU:
      p.dgelu = true;
      break;
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
      p.dgelu = p.bgrad_d = true;
      break;
    case CUBLASLT_EPILOGUE_BGRADA:
      p.bgrad_a = true;
      break;
    case CUBLASLT_EPILOGUE_BGRADB:
      p.bgrad_b = true;
      break;
    default:  // the ReLU family and values that are no epilogue
      p.known = false;
  }
  return p;
}

// A whole problem, checked: the sizes m, n, k and batch it describes.
struct Problem {
  int64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  EpilogueParts ep;
  cudaDataType_t in_type = CUDA_R_32F, out_type = CUDA_R_32F;
};

// Every check cublasLtMatmul makes before touching memory. Pointers that the epilogue needs are
// checked here too: the heuristic sees them through the descriptor.
cublasStatus_t check_problem(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                             cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                             cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, Problem* out) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (desc == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr)
    return kInvalid;
  Problem p;
  // Types: A and B alike; C and D alike; f32 out of f32 in; bf16 in gives bf16 or f32 out.
  if (a->type != b->type || c->type != d->type) return kNotSupported;
  if (a->type == CUDA_R_32F && d->type != CUDA_R_32F) return kNotSupported;
  if (desc->scale_type != CUDA_R_32F) return kNotSupported;
  if (desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && a->type != CUDA_R_32F) return kNotSupported;
  p.in_type = a->type;
  p.out_type = d->type;
  // Shapes: D is m x n, op(A) m x k, op(B) k x n, C like D.
  p.m = static_cast<int64_t>(d->rows);
  p.n = static_cast<int64_t>(d->cols);
  const bool ta = desc->trans_a != CUBLAS_OP_N, tb = desc->trans_b != CUBLAS_OP_N;
  p.k = static_cast<int64_t>(ta ? a->rows : a->cols);
  if (static_cast<int64_t>(ta ? a->cols : a->rows) != p.m) return kInvalid;
  if (static_cast<int64_t>(tb ? b->rows : b->cols) != p.n) return kInvalid;
  if (static_cast<int64_t>(tb ? b->cols : b->rows) != p.k) return kInvalid;
  if (c->rows != d->rows || c->cols != d->cols) return kInvalid;
  // Sizes that BLAS (int) can take.
  for (uint64_t v : {a->rows, a->cols, b->rows, b->cols, d->rows, d->cols})
    if (v > 0x7fffffffu) return kNotSupported;
  // Leading dimensions: at least the rows of the matrix as stored (column-major), and at least 1.
  for (cublasLtMatrixLayout_t l : {a, b, c, d})
    if (l->ld < 1 || l->ld < static_cast<int64_t>(l->rows)) return kInvalid;
  // One batch count for all four.
  if (a->batch != d->batch || b->batch != d->batch || c->batch != d->batch || d->batch < 1)
    return kInvalid;
  p.batch = d->batch;
  // The epilogue and the buffers it reads or writes.
  p.ep = parts_of(desc->epilogue);
  if (!p.ep.known) return kNotSupported;
  const bool uses_bias = p.ep.bias_in || p.ep.bgrad_d || p.ep.bgrad_a || p.ep.bgrad_b;
  if (uses_bias && desc->bias == nullptr) return kInvalid;
  if (desc->bias_type != -1 && desc->bias_type != d->type) return kNotSupported;
  const bool uses_aux = p.ep.aux_out || p.ep.dgelu;
  if (uses_aux) {
    if (desc->aux == nullptr || desc->aux_ld < p.m || desc->aux_ld % 8 != 0) return kInvalid;
    if (p.batch > 1 && desc->aux_batch_stride % 8 != 0) return kInvalid;
  }
  if (desc->aux_type != -1 && desc->aux_type != d->type) return kNotSupported;
  *out = p;
  return CUBLAS_STATUS_SUCCESS;
}

// TF32: f32 with the low 13 of its 23 mantissa bits rounded away (to nearest, ties away from
// zero); infinities and NaN pass through.
float round_to_tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  u = (u + 0x1000u) & ~0x1fffu;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// One element of a matrix of `type` at `base`, as f32.
float load(const void* base, cudaDataType_t type, int64_t at) {
  if (type == CUDA_R_16BF) {
    glass::bf16 v;
    std::memcpy(&v.bits, static_cast<const char*>(base) + at * 2, 2);
    return v.to_float();
  }
  float v;
  std::memcpy(&v, static_cast<const char*>(base) + at * 4, 4);
  return v;
}

void store(void* base, cudaDataType_t type, int64_t at, float value) {
  if (type == CUDA_R_16BF) {
    const glass::bf16 v = glass::bf16::from_float(value);
    std::memcpy(static_cast<char*>(base) + at * 2, &v.bits, 2);
    return;
  }
  std::memcpy(static_cast<char*>(base) + at * 4, &value, 4);
}

// A stored operand (rows x cols, leading dimension ld) as a dense f32 column-major copy with the
// same ld, ready for sgemm: bf16 widened exactly, or f32 rounded to TF32 when asked.
std::vector<float> as_f32(const void* base, const cublasLtMatrixLayoutOpaque& l, bool tf32) {
  std::vector<float> out(static_cast<size_t>(l.ld) * l.cols, 0.0f);
  for (uint64_t j = 0; j < l.cols; ++j)
    for (uint64_t i = 0; i < l.rows; ++i) {
      const int64_t at = static_cast<int64_t>(i + j * l.ld);
      const float v = load(base, l.type, at);
      out[at] = tf32 ? round_to_tf32(v) : v;
    }
  return out;
}

// GELU, tanh approximation, and its derivative, in f32 (the library's epilogue arithmetic).
constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
float gelu(float x) {
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
}
float gelu_grad(float x) {
  const float t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
}

// One batch entry: the product in f32, then the epilogue, element by element.
void run_one(const Problem& p, const cublasLtMatmulDescOpaque& desc, float alpha, float beta,
             const void* A, const cublasLtMatrixLayoutOpaque& a, const void* B,
             const cublasLtMatrixLayoutOpaque& b, const void* C,
             const cublasLtMatrixLayoutOpaque& c, void* D, const cublasLtMatrixLayoutOpaque& d,
             void* bias, void* aux) {
  const bool tf32 = desc.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  const bool ta = desc.trans_a != CUBLAS_OP_N, tb = desc.trans_b != CUBLAS_OP_N;
  // acc = op(A) op(B), m x n with leading dimension m (zeros when k == 0 or alpha == 0).
  std::vector<float> acc(static_cast<size_t>(m) * n, 0.0f);
  std::vector<float> fa, fb;
  if (k > 0 && alpha != 0.0f) {
    fa = as_f32(A, a, tf32);
    fb = as_f32(B, b, tf32);
    cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, 1.0f, fa.data(), static_cast<int>(a.ld), fb.data(), static_cast<int>(b.ld), 0.0f,
                acc.data(), m);
  }
  const cudaDataType_t t = d.type;
  std::vector<double> bias_sum(p.ep.bgrad_d ? m : 0, 0.0);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      // pre = alpha op(A) op(B) + beta C (C not read when beta == 0), + bias[i].
      float pre = alpha * acc[i + static_cast<size_t>(j) * m];
      if (beta != 0.0f) pre += beta * load(C, c.type, i + j * c.ld);
      if (p.ep.bias_in) pre += load(bias, t, i);
      float out = pre;
      if (p.ep.aux_out) store(aux, t, i + j * desc.aux_ld, pre);
      if (p.ep.gelu) out = gelu(pre);
      if (p.ep.dgelu) out = pre * gelu_grad(load(aux, t, i + j * desc.aux_ld));
      if (p.ep.bgrad_d) bias_sum[i] += out;
      store(D, t, i + j * d.ld, out);
    }
  if (p.ep.bgrad_d)
    for (int i = 0; i < m; ++i) store(bias, t, i, static_cast<float>(bias_sum[i]));
  // BGRADA: bias[i] = sum over l of op(A)[i][l]; BGRADB: bias[j] = sum over l of op(B)[l][j].
  if (p.ep.bgrad_a)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int l = 0; l < k; ++l) s += load(A, a.type, ta ? l + i * a.ld : i + l * a.ld);
      store(bias, t, i, static_cast<float>(s));
    }
  if (p.ep.bgrad_b)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int l = 0; l < k; ++l) s += load(B, b.type, tb ? j + l * b.ld : l + j * b.ld);
      store(bias, t, j, static_cast<float>(s));
    }
}

// One matrix operand as cublasLtMatmul receives it.
struct Operand {
  const void* data;
  cublasLtMatrixLayout_t layout;
};

// Whether every matrix of A, B, C and D (each batch's, batch_stride elements apart) is aligned as
// the heuristic was told it would be (the algorithm carries it: data[1 + i], in bytes). A real
// kernel chosen for 16-byte loads reads a less aligned pointer wrongly or faults with a misaligned
// address; the emulator names the operand instead.
bool aligned_as_chosen(const cublasLtMatmulAlgo_t& algo, const Problem& p, Operand a, Operand b,
                       Operand c, Operand d) {
  const Operand operands[] = {a, b, c, d};
  for (int i = 0; i < 4; ++i) {
    const Operand& o = operands[i];
    if (o.data == nullptr) continue;
    const size_t es = type_size(i < 2 ? p.in_type : p.out_type);
    const uint64_t bytes = algo.data[1 + i];
    const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(o.data));
    const auto stride = static_cast<uint64_t>(o.layout->batch_stride) * es;
    if (address % bytes == 0 && (p.batch == 1 || stride % bytes == 0)) continue;
    std::fprintf(stderr,
                 "emulated cublasLtMatmul: %c at %p (batch stride %llu bytes) is not %llu-byte "
                 "aligned, the alignment its algorithm was chosen for "
                 "(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_%c_BYTES, default 256)\n",
                 "ABCD"[i], o.data, static_cast<unsigned long long>(stride),
                 static_cast<unsigned long long>(bytes), "ABCD"[i]);
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (handle == nullptr) return kInvalid;
  *handle = new (std::nothrow) cublasLtContext;
  return *handle == nullptr ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t glass_emu_cublasLtCreateStreamOrdered(cublasLtHandle_t* handle) {
  const cublasStatus_t status = cublasLtCreate(handle);
  if (status == CUBLAS_STATUS_SUCCESS) (*handle)->stream_ordered = true;
  return status;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type) {
  if (desc == nullptr) return kInvalid;
  if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
    return kNotSupported;
  if (scale_type != CUDA_R_32F) return kNotSupported;
  *desc = new (std::nothrow) cublasLtMatmulDescOpaque;
  if (*desc == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  (*desc)->compute = compute;
  (*desc)->scale_type = scale_type;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
  if (desc == nullptr) return kInvalid;
  int32_t i32 = 0;
  uint32_t u32 = 0;
  int64_t i64 = 0;
  void* ptr = nullptr;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      if (!read_attr(buf, size, &i32)) return kInvalid;
      if (i32 != CUBLAS_COMPUTE_32F && i32 != CUBLAS_COMPUTE_32F_FAST_TF32) return kNotSupported;
      desc->compute = static_cast<cublasComputeType_t>(i32);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      if (!read_attr(buf, size, &i32)) return kInvalid;
      if (i32 != CUDA_R_32F) return kNotSupported;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      if (!read_attr(buf, size, &i32)) return kInvalid;
      return i32 == CUBLASLT_POINTER_MODE_HOST ? CUBLAS_STATUS_SUCCESS : kNotSupported;
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
      if (!read_attr(buf, size, &i32) || !is_op(i32)) return kInvalid;
      (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->trans_a : desc->trans_b) =
          static_cast<cublasOperation_t>(i32);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_TRANSC:
      if (!read_attr(buf, size, &i32) || !is_op(i32)) return kInvalid;
      return i32 == CUBLAS_OP_N ? CUBLAS_STATUS_SUCCESS : kNotSupported;
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      if (!read_attr(buf, size, &u32)) return kInvalid;
      if (!parts_of(u32).known) return kNotSupported;
      desc->epilogue = u32;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      if (!read_attr(buf, size, &ptr)) return kInvalid;
      (attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER ? desc->bias : desc->aux) = ptr;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
      if (!read_attr(buf, size, &i64) || i64 < 0) return kInvalid;
      if (attr == CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE) desc->bias_batch_stride = i64;
      if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD) desc->aux_ld = i64;
      if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE) desc->aux_batch_stride = i64;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
      if (!read_attr(buf, size, &i32)) return kInvalid;
      if (i32 != -1 && !is_type(i32)) return kNotSupported;
      (attr == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE ? desc->bias_type : desc->aux_type) = i32;
      return CUBLAS_STATUS_SUCCESS;
  }
  return kNotSupported;  // an attribute the emulation does not implement
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (layout == nullptr) return kInvalid;
  if (!is_type(type)) return kNotSupported;
  *layout = new (std::nothrow) cublasLtMatrixLayoutOpaque;
  if (*layout == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  (*layout)->type = type;
  (*layout)->rows = rows;
  (*layout)->cols = cols;
  (*layout)->ld = ld;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t size) {
  if (layout == nullptr) return kInvalid;
  uint32_t u32 = 0;
  int32_t i32 = 0;
  uint64_t u64 = 0;
  int64_t i64 = 0;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      if (!read_attr(buf, size, &u32)) return kInvalid;
      if (!is_type(static_cast<int32_t>(u32))) return kNotSupported;
      layout->type = static_cast<cudaDataType_t>(u32);
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      // Column-major only: the tiled and row orders are a different memory layout, which the
      // emulation would have to guess at.
      if (!read_attr(buf, size, &i32)) return kInvalid;
      return i32 == CUBLASLT_ORDER_COL ? CUBLAS_STATUS_SUCCESS : kNotSupported;
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      if (!read_attr(buf, size, &u64)) return kInvalid;
      (attr == CUBLASLT_MATRIX_LAYOUT_ROWS ? layout->rows : layout->cols) = u64;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_LD:
      if (!read_attr(buf, size, &i64)) return kInvalid;
      layout->ld = i64;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      if (!read_attr(buf, size, &i32) || i32 < 1) return kInvalid;
      layout->batch = i32;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      if (!read_attr(buf, size, &i64)) return kInvalid;
      layout->batch_stride = i64;
      return CUBLAS_STATUS_SUCCESS;
  }
  return kNotSupported;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return kInvalid;
  *pref = new (std::nothrow) cublasLtMatmulPreferenceOpaque;
  return *pref == nullptr ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  if (pref == nullptr) return kInvalid;
  uint32_t u32 = 0;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
      return read_attr(buf, size, &u32) ? CUBLAS_STATUS_SUCCESS : kInvalid;
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return read_attr(buf, size, &pref->max_workspace) ? CUBLAS_STATUS_SUCCESS : kInvalid;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
      if (!read_attr(buf, size, &u32) || (u32 & ~uint32_t{CUBLASLT_REDUCTION_SCHEME_MASK}) != 0)
        return kInvalid;
      pref->reduction_scheme_mask = u32;
      return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      if (!read_attr(buf, size, &u32) || u32 == 0) return kInvalid;
      pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = u32;
      return CUBLAS_STATUS_SUCCESS;
  }
  return kNotSupported;
}

namespace {
std::atomic<uint32_t> g_no_algorithm_for{CUBLASLT_EPILOGUE_DEFAULT};
// The reduction scheme mask of the last cublasLtMatmul's algorithm.
std::atomic<uint32_t> g_last_reduction_scheme_mask{CUBLASLT_REDUCTION_SCHEME_MASK};
// Where the heuristic's algorithm carries the preference's reduction scheme mask.
constexpr int kAlgoReductionMask = 5;
}  // namespace

uint32_t glass_emu_cublasLtLastMatmulReductionSchemeMask(void) {
  return g_last_reduction_scheme_mask.load();
}

void glass_emu_cublasLtFindNoAlgorithmFor(cublasLtEpilogue_t epilogue) {
  g_no_algorithm_for.store(epilogue);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a_desc,
    cublasLtMatrixLayout_t b_desc, cublasLtMatrixLayout_t c_desc, cublasLtMatrixLayout_t d_desc,
    cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t results[],
    int* return_count) {
  if (return_count == nullptr || results == nullptr || pref == nullptr || requested < 1)
    return kInvalid;
  *return_count = 0;
  Problem p;
  const cublasStatus_t status = check_problem(handle, desc, a_desc, b_desc, c_desc, d_desc, &p);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const uint32_t refused = g_no_algorithm_for.load();
  if (refused != CUBLASLT_EPILOGUE_DEFAULT && desc->epilogue == refused) return status;
  cublasLtMatmulHeuristicResult_t r{};
  r.algo.data[0] = kAlgoTag;
  for (int i = 0; i < 4; ++i) r.algo.data[1 + i] = pref->min_alignment[i];  // what it may assume
  r.algo.data[kAlgoReductionMask] = pref->reduction_scheme_mask;            // how it may split K
  r.workspaceSize = 0;  // the host product needs none
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  results[0] = r;
  *return_count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t a_desc, const void* B,
                              cublasLtMatrixLayout_t b_desc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t c_desc, void* D, cublasLtMatrixLayout_t d_desc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  (void)workspace;
  (void)workspace_bytes;
  Problem p;
  const cublasStatus_t status = check_problem(handle, desc, a_desc, b_desc, c_desc, d_desc, &p);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (alpha == nullptr || beta == nullptr || A == nullptr || B == nullptr || D == nullptr)
    return kInvalid;
  if (algo != nullptr && algo->data[0] != kAlgoTag) return kInvalid;
  if (algo != nullptr &&
      !aligned_as_chosen(*algo, p, {A, a_desc}, {B, b_desc}, {C, c_desc}, {D, d_desc}))
    return kInvalid;
  // In place (C and D the same memory) only with one layout.
  if (C == D && c_desc->ld != d_desc->ld) return kInvalid;
  float al, be;
  std::memcpy(&al, alpha, 4);
  std::memcpy(&be, beta, 4);
  if (be != 0.0f && C == nullptr) return kInvalid;
  g_last_reduction_scheme_mask.store(algo != nullptr
                                         ? static_cast<uint32_t>(algo->data[kAlgoReductionMask])
                                         : uint32_t{CUBLASLT_REDUCTION_SCHEME_MASK});
  if (p.m == 0 || p.n == 0) return CUBLAS_STATUS_SUCCESS;
  const size_t out_size = type_size(p.out_type), in_size = type_size(p.in_type);
  // The descriptors by value: the caller may change or destroy them once the call has returned.
  auto matmul = [=, desc = *desc, a = *a_desc, b = *b_desc, c = *c_desc, d = *d_desc] {
    for (int32_t e = 0; e < p.batch; ++e) {
      auto at = [&](const void* base, int64_t stride, size_t es) {
        return static_cast<const char*>(base) + e * stride * static_cast<int64_t>(es);
      };
      void* d_e = static_cast<char*>(D) + e * d.batch_stride * static_cast<int64_t>(out_size);
      void* bias_e = desc.bias == nullptr
                         ? nullptr
                         : static_cast<char*>(desc.bias) +
                               e * desc.bias_batch_stride * static_cast<int64_t>(out_size);
      void* aux_e = desc.aux == nullptr
                        ? nullptr
                        : static_cast<char*>(desc.aux) +
                              e * desc.aux_batch_stride * static_cast<int64_t>(out_size);
      run_one(p, desc, al, be, at(A, a.batch_stride, in_size), a, at(B, b.batch_stride, in_size), b,
              C == nullptr ? nullptr : at(C, c.batch_stride, out_size), c, d_e, d, bias_e, aux_e);
    }
  };
  // A bias or aux the epilogue writes counts as written, one it reads as read.
  const bool bias_out = p.ep.bgrad_d || p.ep.bgrad_a || p.ep.bgrad_b;
  std::vector<glass::emu::runtime::Access> accesses = {{A, false}, {B, false}, {D, true}};
  if (C != nullptr && C != D) accesses.push_back({C, false});
  if (desc->bias != nullptr) accesses.push_back({desc->bias, bias_out});
  if (desc->aux != nullptr) accesses.push_back({desc->aux, p.ep.aux_out});
  return glass::emu::cublas::run_in_stream_order(handle->stream_ordered, stream, "cublasLtMatmul",
                                                 std::move(accesses), matmul);
}

}  // extern "C"
