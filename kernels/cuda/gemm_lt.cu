// cuda GEMM through cuBLASLt: the engine's one cuBLASLt call site, for GEMMs whose epilogue is
// fused into the product (a bias; GELU keeping its input as aux; GELU's gradient; a bias
// gradient, kernels/backend.h GemmEpilogue) and for f32 GEMMs on TF32 tensor cores (--tf32).
//
// The mapping to column-major is gemm.cu's: row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T, so cuBLASLt's A is our B, its B our A, its m our n and its n our m,
// transpose flags and leading dimensions unchanged. The epilogues, in those terms:
//   our bias[j] (one per column of C)      = cuBLASLt's bias, one per row of its D  (BIAS)
//   gelu, aux = pre                        = GELU_AUX(_BIAS), aux n x m with ld aux_ld
//   gelu_backward                          = DGELU
//   + bias_grad[j] = sum over rows of C    = DGELU_BGRAD (sum over the columns of its D)
//   bias_grad[i] = sum over l of op(A)[i][l] = BGRADB (op(A) is its B; one value per column of D)
// cuBLASLt checks the layouts itself (ld >= rows, sizes that agree, aux ld a multiple of 8): a
// wrong argument comes back as a status, on a GPU and on emu alike, and becomes a glass::Error
// naming the call and every argument.
//
// Heuristics are cached: the first GEMM of a shape (sizes, leading dimensions, types, epilogue,
// compute type, and the alignment of every pointer, which the heuristic is told and its choice
// depends on) asks cublasLtMatmulAlgoGetHeuristic and keeps its algorithm; later GEMMs of that
// shape reuse it. The workspace is gemm.cu's, one per device and stream (kGemmWorkspaceBytes, the
// size NVIDIA suggests for Hopper), offered to every call.
//
// Where the heuristic has no algorithm for a shape (CUBLAS_STATUS_NOT_SUPPORTED or none found:
// cuBLASLt does not cover every epilogue for every type, layout and alignment), the GEMM goes to
// cuBLAS and the epilogue runs as separate launches (gemm_in_passes: the same passes as cpu's),
// said once per shape in the log; set_gemm_epilogues_in_passes forces that path everywhere.
//
// Compiled by the host compiler (GLASS_EMU) the same calls are answered by the emulated cuBLASLt
// of emucuda/cublas (cublasLt.h), which computes the same math on the host: at once for `emu`,
// queued on the stream passed to cublasLtMatmul for `cuda` on the emulated CUDA runtime
// (create_lt_handle).
#if defined(GLASS_EMU)
#include "emucuda/cublas/cublasLt.h"
#else
#include <cublasLt.h>
#endif

#include <array>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "engine/log_warning.h"
#include "kernels/costs/gemm.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

std::string describe(const GemmArgs& g, const GemmEpilogue& e) {
  return fmt::format("{} with epilogue {} (aux {}, aux_ld {}, bias_grad {}), tf32 {}",
                     describe_gemm_args(g), gemm_epilogue_name(e), e.aux.describe(), e.aux_ld,
                     e.bias_grad.describe(), tf32_enabled());
}

void check_lt(cublasStatus_t status, const char* call, const GemmArgs& g, const GemmEpilogue& e) {
  GLASS_CHECK(status == CUBLAS_STATUS_SUCCESS, "gemm (cuBLASLt): {} returned {} ({}) for {}", call,
              cublasGetStatusName(status), cublasGetStatusString(status), describe(g, e));
}

// The cuBLASLt epilogue of (our epilogue, whether a bias is added).
cublasLtEpilogue_t lt_epilogue(const GemmEpilogue& e, bool bias) {
  switch (e.activation) {
    case GemmActivation::gelu:
      return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case GemmActivation::gelu_backward:
      return e.bias_grad_of == GemmBiasGrad::columns_of_c ? CUBLASLT_EPILOGUE_DGELU_BGRAD
                                                          : CUBLASLT_EPILOGUE_DGELU;
    case GemmActivation::none:
      break;
  }
  if (e.bias_grad_of == GemmBiasGrad::rows_of_a) return CUBLASLT_EPILOGUE_BGRADB;
  return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

// The launch's name in traces: which epilogue ran inside the GEMM.
const char* launch_name(cublasLtEpilogue_t ep) {
  switch (ep) {
    case CUBLASLT_EPILOGUE_BIAS:
      return "cublasLtMatmul_bias";
    case CUBLASLT_EPILOGUE_GELU_AUX:
      return "cublasLtMatmul_gelu_aux";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
      return "cublasLtMatmul_gelu_aux_bias";
    case CUBLASLT_EPILOGUE_DGELU:
      return "cublasLtMatmul_dgelu";
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
      return "cublasLtMatmul_dgelu_bgrad";
    case CUBLASLT_EPILOGUE_BGRADB:
      return "cublasLtMatmul_bgradb";
    default:
      return "cublasLtMatmul";
  }
}

cudaDataType_t lt_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The alignment in bytes every matrix of an operand has: the largest power of two, up to 256,
// that divides its address and, in a strided batch, the distance between its matrices. cuBLASLt's
// heuristic never sees the pointers: it assumes 256 unless told (CUBLASLT_MATMUL_PREF_MIN_
// ALIGNMENT_*_BYTES), and a kernel chosen for an alignment the data lacks fails with
// CUBLAS_STATUS_NOT_SUPPORTED or faults with a misaligned address. So it is told, and the
// alignment is part of a shape's key.
uint32_t alignment(const void* p, int64_t batch = 1, int64_t stride_elems = 0, size_t elem = 1) {
  auto a = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  if (batch > 1 && stride_elems != 0) a |= static_cast<uint64_t>(stride_elems) * elem;
  uint32_t align = 1;
  while (align < 256 && a % (2 * align) == 0) align *= 2;
  return align;
}

// Everything the heuristic's answer depends on.
using ShapeKey = std::array<int64_t, 24>;

// The process's cuBLASLt state: a handle per device, the heuristic's algorithm per shape. Created
// on first use and never destroyed (as gemm.cu's cuBLAS handles: static destruction could come
// after the CUDA context is gone).
struct LtState {
  std::mutex mutex;
  std::map<std::pair<int, int>, cublasLtHandle_t> handles;
  std::map<ShapeKey, cublasLtMatmulHeuristicResult_t> algos;
  std::set<ShapeKey> no_algorithm;  // shapes the heuristic had nothing for: run in passes
};

LtState& state() {
  static auto* s = new LtState;  // never destroyed
  return *s;
}

// A new handle for `device`: stream-ordered for `cuda` on the emulated CUDA runtime, as gemm.cu's
// create_handle.
cublasStatus_t create_lt_handle(cublasLtHandle_t* handle, [[maybe_unused]] Device device) {
#if defined(GLASS_EMU) && defined(GLASS_CUDA_BUILD_SERVES_CUDA)
  if (through_cuda_runtime(device)) return glass_emu_cublasLtCreateStreamOrdered(handle);
#endif
  return cublasLtCreate(handle);
}

// Descriptors that destroy themselves.
struct Layout {
  cublasLtMatrixLayout_t layout = nullptr;
  ~Layout() {
    if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
  }
};
struct Desc {
  cublasLtMatmulDesc_t desc = nullptr;
  ~Desc() {
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};
struct Preference {
  cublasLtMatmulPreference_t pref = nullptr;
  ~Preference() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
  }
};

// bias_grad[i] = sum over l of op(A)[i][l]: op(A) copied contiguous, then summed by sum_dim.
void sum_rows_of_op_a(const GemmArgs& g, const Tensor& bias_grad) {
  const int64_t rows = g.trans_a ? g.k : g.m, cols = g.trans_a ? g.m : g.k;
  const Tensor a = Tensor::empty({rows, cols}, g.a.dtype(), g.a.device());
  copy(g.a.as_strided({rows, cols}, {g.lda, 1}, g.a.offset()), a);
  sum_dim(a, bias_grad, g.trans_a ? 0 : 1);
}

// What cublasLtMatmul would do, without it: op(A)'s row sums, the product by cuBLAS (no TF32),
// the bias added to each row by a broadcast add, then the epilogue's passes. For a shape the
// heuristic had no algorithm for, or every shape under set_gemm_epilogues_in_passes.
void gemm_in_passes(const GemmArgs& g, const GemmEpilogue& e) {
  if (e.bias_grad_of == GemmBiasGrad::rows_of_a) sum_rows_of_op_a(g, e.bias_grad);
  GemmArgs product = g;
  product.bias = Tensor();
  gemm_cublas(product);
  if (g.bias.defined()) {  // C[b][i][j] += bias[j], every batch entry in one launch
    const Tensor c = g.c.as_strided({g.batch, g.m, g.n}, {g.stride_c, g.ldc, 1}, g.c.offset());
    binary(BinaryOp::add, c, g.bias.as_strided({g.batch, g.m, g.n}, {0, 0, 1}, g.bias.offset()), c);
  }
  gemm_epilogue_passes(g, e);
}

}  // namespace

// GemmArgs (+ epilogue) as one cublasLtMatmul. Callers have checked the arguments
// (check_gemm_args, and check_gemm_epilogue when there is an epilogue).
void gemm_lt(const GemmArgs& g, const GemmEpilogue& e) {
  if (g.m == 0 || g.n == 0) return;
  if (gemm_epilogues_in_passes()) return gemm_in_passes(g, e);
  const bool bias = g.bias.defined();
  const cublasLtEpilogue_t ep = lt_epilogue(e, bias);
  const DType in = g.a.dtype(), out = g.c.dtype();
  const bool tf32 = in == DType::f32 && tf32_enabled();
  const cublasComputeType_t compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const Device device = g.c.device();
  // The bias pointer carries the bias (BIAS, GELU_AUX_BIAS) or receives the bias gradient.
  const Tensor& bias_buffer = bias ? g.bias : e.bias_grad;
  void* bias_ptr = bias_buffer.defined() ? bias_buffer.raw_data() : nullptr;
  void* aux_ptr = e.aux.defined() ? e.aux.raw_data() : nullptr;
  const void* a_ptr = g.a.raw_data();
  const void* b_ptr = g.b.raw_data();
  void* c_ptr = g.c.raw_data();

  LtState& s = state();
  cublasLtHandle_t handle = nullptr;
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    cublasLtHandle_t& h = s.handles[{static_cast<int>(device.kind), device.index}];
    if (h == nullptr) check_lt(create_lt_handle(&h, device), "cublasLtCreate", g, e);
    handle = h;
  }
  const Tensor workspace = gemm_workspace(device);

  // cuBLASLt's view: D (= our C^T) is n x m, its A is our B, its B our A.
  const auto ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  Desc desc;
  check_lt(cublasLtMatmulDescCreate(&desc.desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate", g,
           e);
  auto set_desc = [&](cublasLtMatmulDescAttributes_t attr, const void* value, size_t size,
                      const char* name) {
    check_lt(cublasLtMatmulDescSetAttribute(desc.desc, attr, value, size), name, g, e);
  };
  const int32_t lt_ta = tb, lt_tb = ta;
  const uint32_t lt_ep = ep;
  set_desc(CUBLASLT_MATMUL_DESC_TRANSA, &lt_ta, sizeof(lt_ta), "SetAttribute(TRANSA)");
  set_desc(CUBLASLT_MATMUL_DESC_TRANSB, &lt_tb, sizeof(lt_tb), "SetAttribute(TRANSB)");
  set_desc(CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_ep, sizeof(lt_ep), "SetAttribute(EPILOGUE)");
  if (bias_ptr != nullptr) {
    const int32_t bias_type = lt_type(bias_buffer.dtype());
    set_desc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr, sizeof(bias_ptr),
             "SetAttribute(BIAS_POINTER)");
    set_desc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type),
             "SetAttribute(BIAS_DATA_TYPE)");
  }
  if (aux_ptr != nullptr) {
    const int64_t aux_ld = e.aux_ld;
    set_desc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_ptr, sizeof(aux_ptr),
             "SetAttribute(EPILOGUE_AUX_POINTER)");
    set_desc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld),
             "SetAttribute(EPILOGUE_AUX_LD)");
  }

  // Layouts as stored, column-major: our B (k x n row-major, or n x k when transposed) is its A.
  Layout la, lb, lc;
  auto make_layout = [&](Layout& l, DType t, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                         const char* name) {
    check_lt(cublasLtMatrixLayoutCreate(&l.layout, lt_type(t), static_cast<uint64_t>(rows),
                                        static_cast<uint64_t>(cols), ld),
             name, g, e);
    if (g.batch == 1) return;
    const auto batch = static_cast<int32_t>(g.batch);
    check_lt(cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                              sizeof(batch)),
             "SetAttribute(BATCH_COUNT)", g, e);
    check_lt(cublasLtMatrixLayoutSetAttribute(l.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                              &stride, sizeof(stride)),
             "SetAttribute(STRIDED_BATCH_OFFSET)", g, e);
  };
  make_layout(la, in, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb, g.stride_b,
              "cublasLtMatrixLayoutCreate(A = our B)");
  make_layout(lb, in, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda, g.stride_a,
              "cublasLtMatrixLayoutCreate(B = our A)");
  make_layout(lc, out, g.n, g.m, g.ldc, g.stride_c, "cublasLtMatrixLayoutCreate(C = D)");

  // Each operand's alignment, in cuBLASLt's names (its A is our B, its B our A; C and D are ours).
  const size_t es_a = dtype_size(in), es_c = dtype_size(out);
  const uint32_t align_a = alignment(b_ptr, g.batch, g.stride_b, es_a),
                 align_b = alignment(a_ptr, g.batch, g.stride_a, es_a),
                 align_cd = alignment(c_ptr, g.batch, g.stride_c, es_c);

  // The algorithm: from the cache, or from the heuristic the first time this shape is seen.
  const ShapeKey key = {static_cast<int64_t>(device.kind),
                        device.index,
                        g.m,
                        g.n,
                        g.k,
                        g.batch,
                        g.lda,
                        g.ldb,
                        g.ldc,
                        g.stride_a,
                        g.stride_b,
                        g.stride_c,
                        g.trans_a,
                        g.trans_b,
                        static_cast<int64_t>(in),
                        static_cast<int64_t>(out),
                        static_cast<int64_t>(ep),
                        static_cast<int64_t>(compute),
                        e.aux_ld,
                        align_a,
                        align_b,
                        align_cd,
                        bias_ptr == nullptr ? 0 : alignment(bias_ptr),
                        aux_ptr == nullptr ? 0 : alignment(aux_ptr)};
  cublasLtMatmulHeuristicResult_t algo{};
  bool cached = false, no_algorithm = false;
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    no_algorithm = s.no_algorithm.count(key) != 0;
    const auto found = s.algos.find(key);
    if (found != s.algos.end()) {
      algo = found->second;
      cached = true;
    }
  }
  if (no_algorithm) return gemm_in_passes(g, e);
  if (!cached) {
    Preference pref;
    check_lt(cublasLtMatmulPreferenceCreate(&pref.pref), "cublasLtMatmulPreferenceCreate", g, e);
    const uint64_t max_workspace = kGemmWorkspaceBytes;
    check_lt(
        cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &max_workspace, sizeof(max_workspace)),
        "SetAttribute(MAX_WORKSPACE_BYTES)", g, e);
    // Split-K parts added in the compute type (f32), never in the output type (bf16): the
    // products are "summed in f32" with or without a split.
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    check_lt(
        cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                             &reduction, sizeof(reduction)),
        "SetAttribute(REDUCTION_SCHEME_MASK)", g, e);
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_cd},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_cd}};
    for (const auto& [attr, bytes] : alignments)
      check_lt(cublasLtMatmulPreferenceSetAttribute(pref.pref, attr, &bytes, sizeof(bytes)),
               "SetAttribute(MIN_ALIGNMENT_*_BYTES)", g, e);
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle, desc.desc, la.layout, lb.layout, lc.layout, lc.layout, pref.pref, 1, &algo, &found);
    // Nothing for this combination (epilogue, types, layouts, alignment): the same math in passes.
    // A wrong argument (INVALID_VALUE and the rest) is still an error.
    if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) {
      // once per shape: the shape is remembered below
      log_warning("cuBLASLt has no algorithm for " + describe(g, e) +
                  ": its epilogue runs as separate launches");
      {
        const std::lock_guard<std::mutex> lock(s.mutex);
        s.no_algorithm.insert(key);
      }
      return gemm_in_passes(g, e);
    }
    check_lt(status, "cublasLtMatmulAlgoGetHeuristic", g, e);
    const std::lock_guard<std::mutex> lock(s.mutex);
    s.algos.emplace(key, algo);
  }

  // FLOPs: 2mnk per matrix, and one per element for the epilogue's add or reduction (GELU's
  // tanh is not counted). Bytes: each distinct input matrix once, C written (and read when
  // beta != 0), aux written or read, the bias or bias gradient once.
  const double es_in = static_cast<double>(dtype_size(in)),
               es_out = static_cast<double>(dtype_size(out));
  const double mn = static_cast<double>(g.m) * static_cast<double>(g.n);
  const GemmElements elems = gemm_elements(g);  // the bias: bias_buffer, counted below
  LaunchInfo info;
  info.kernel = launch_name(ep);
  info.device = device;
  info.flops =
      gemm_flops(g) + (ep == CUBLASLT_EPILOGUE_DEFAULT ? 0.0 : mn * static_cast<double>(g.batch));
  info.bytes = es_in * (elems.a + elems.b) + es_out * elems.c +
               (aux_ptr != nullptr ? es_out * mn : 0.0) +
               (bias_ptr != nullptr ? es_out * static_cast<double>(bias_buffer.numel()) : 0.0);
  // bf16 inputs: tensor cores; f32 under --tf32: TF32 tensor cores; plain f32: the CUDA cores.
  info.unit = in == DType::bf16 ? ComputeUnit::tensor_core_bf16
              : tf32            ? ComputeUnit::tensor_core_tf32
                                : ComputeUnit::cuda_core;
  info.stream = launch_stream_id(device);
  info.native_stream = launch_stream(device);
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  glass::launch(info, [&] {
    status = cublasLtMatmul(handle, desc.desc, &alpha, b_ptr, la.layout, a_ptr, lb.layout, &beta,
                            c_ptr, lc.layout, c_ptr, lc.layout, &algo.algo, workspace.raw_data(),
                            static_cast<size_t>(kGemmWorkspaceBytes), launch_stream(device));
  });
  check_lt(status, "cublasLtMatmul", g, e);
}

int64_t gemm_lt_cached_shapes() {
  LtState& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return static_cast<int64_t>(s.algos.size());
}

void gemm_epilogue(const GemmArgs& g, const GemmEpilogue& e) {
  check_gemm_args(g);
  check_gemm_epilogue(g, e);
  if (g.m > 0 && g.n > 0) return gemm_lt(g, e);
  // No product to fuse into. The column sums of an empty C are zeros (or empty); the row sums
  // of op(A) (m x k, stored k x m when transposed) are still owed when only n is 0.
  if (e.bias_grad_of == GemmBiasGrad::columns_of_c) fill(e.bias_grad, 0);
  if (e.bias_grad_of == GemmBiasGrad::rows_of_a && g.m > 0) sum_rows_of_op_a(g, e.bias_grad);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
