// cuDNN's fused flash attention: causal SDPA forward and backward as cuDNN 9 operation graphs,
// built with the backend API of cudnn.h (descriptor by descriptor, no cudnn_frontend), for the
// contract of cudnn_attention.h (qkv [B, T, (H + 2 Hkv) D] in, out [B, T, C] and lse [B, H, T]
// out).
//
// cuDNN has no single "attention" call that takes a causal mask: one describes the math as a graph
// of matmuls, pointwise ops and reductions, and cuDNN's SDPA engines recognise that graph and run
// it as one fused flash-attention kernel (S never reaches memory). The graphs below are the ones
// those engines match (the shapes NVIDIA's cudnn_frontend builds for its SDPA node):
//
//   forward:  S = Q K^T * scale; S[i, j > i] = -inf (rows and columns from GEN_INDEX, CMP_GE,
//             BINARY_SELECT); M = rowmax S; E = exp(S - M); Z = rowsum E;
//             stats = M + log Z; P = E / Z (bf16); O = P V
//   backward: Dsum = rowsum(dO * O) (a real f32 tensor, [B, H, T, 1]);
//             P = exp(S * scale - stats) with the causal mask; dV = P^T dO; dP = dO V^T;
//             dS = (dP - Dsum) * P * scale; dK = dS^T Q; dQ = dS K
//   grouped-query attention (Hkv < H): K and V have Hkv heads and the matmuls broadcast them over
//             the H / Hkv query heads of each; backward computes dK and dV per query head
//             ([B, H, T, D], on chip) and sums each group into [B, Hkv, T, D] by a reduction, as
//             NVIDIA's frontend builds it for its SDPA node
//
// The stats output is exactly the contract's lse: cuDNN's softmax stats are max + log(sum exp) in
// natural log, f32, per (batch, head, query row), which with strides {H*T, T, 1, 1} is a
// contiguous [B, H, T] tensor. No conversion.
//
// Layouts: Q, K, V are strided views of qkv (cudnn_sdpa_layout in the header), O a strided view
// of out; the graph reads and writes them in place, no transposing copies.
//
// dtypes: cuDNN's fused SDPA kernels take f16 and bf16 (NVIDIA's support tables; cuDNN 9.19 finds
// an engine for an f32 forward graph, with TF32 math, but none for an f32 backward, and the lse
// the backward reads must come from the same inputs). bf16 tensors go straight in. f32 tensors (the
// engine's training dtype today) are converted: qkv (and out, dout) to bf16 scratch with the
// engine's cast kernel, and the bf16 results back to f32 - extra traffic of 6 bytes per element
// converted (read f32, write bf16) and 6 per element converted back, i.e. about 24*B*T*C bytes
// forward and 54*B*T*C backward, against the kernel's own ~8*B*T*C and ~18*B*T*C: a visible cost,
// shown as separate `cast` launches. The results then carry bf16 rounding (~3 significant digits),
// unlike the f32 flash kernel.
//
// Determinism: the backward graph is the "deterministic" variant (dQ written by the matmul, not
// accumulated with atomics in an f32 workspace), so the same inputs give the same bits. Engines
// cuDNN notes as non-deterministic are passed over; where one is all there is, it is used and the
// log says so, once per shape.
//
// Plans: building a graph, querying heuristics and finalising a plan (the SDPA engines compile
// their kernels at run time, with NVRTC) take about a second; they are done once per (device,
// direction, B, H, Hkv, T, D), outside any CUDA graph capture, and cached with the plan's workspace
// size. The scale is passed by value at execution, so one plan serves every scale. The cache is
// not bounded: a captured CUDA graph replays kernels that belong to its plans, so none may be
// freed while the process runs (sampling without a KV cache builds one per sequence length).
//
// In the emu build (no cuDNN there: NVIDIA ships no CPU cuDNN and the emulator emulates none) and
// in a cuda build configured without cuDNN, the two functions check their arguments like the real
// ones and then refuse with one line.
#include "kernels/cuda/cudnn_attention.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "engine/log_warning.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"

#if !defined(GLASS_EMU) && defined(GLASS_HAS_CUDNN)
#include <cudnn.h>
#define GLASS_CUDNN_ATTENTION 1
#endif

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

#if !defined(GLASS_CUDNN_ATTENTION)

namespace {
[[noreturn]] void refuse(const char* kernel, const CudnnAttentionShape& shape, const Tensor& qkv) {
  if (!through_cuda_runtime(qkv.device()))
    fail("{}: cuDNN's fused attention runs on the cuda device only (emu has no cuDNN); qkv {} ({})",
         kernel, qkv.describe(), shape.describe());
  fail(
      "{}: this build has no cuDNN (CMake did not find libcudnn and cudnn.h; set CUDNN_ROOT and "
      "reconfigure); qkv {} ({})",
      kernel, qkv.describe(), shape.describe());
}
}  // namespace

bool cudnn_attention_available() { return false; }

int64_t cudnn_attention_graph_ops(bool backward, int64_t B, int64_t T, int64_t n_head,
                                  int64_t n_kv_head, int64_t head_dim) {
  fail("cudnn_attention_graph_ops: this build has no cuDNN");
}

void cudnn_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale) {
  const char* kernel = "cudnn_attention_forward";
  refuse(kernel, CudnnAttentionShape(kernel, qkv, out, lse, n_head, n_kv_head), qkv);
}

void cudnn_attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                              const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                              int64_t n_kv_head, double scale) {
  const char* kernel = "cudnn_attention_backward";
  const CudnnAttentionShape shape(kernel, qkv, out, lse, n_head, n_kv_head);
  shape.check_backward(kernel, qkv, dout, dqkv);
  refuse(kernel, shape, qkv);
}

#else  // GLASS_CUDNN_ATTENTION: nvcc's build, linked with cuDNN

namespace {

// --- errors: every cuDNN status is checked, naming the call, the attribute and the shape.

// What cuDNN said about its last failure (cudnnGetLastErrorString), on one line: its lines joined
// with " | ", at most 800 characters. Read right after each failure: a later call overwrites it
// (the fallback heuristics' "graph pattern" complaints replaced mode A's real reason, a missing
// libcuda or NVRTC, in a run without a GPU).
std::string last_cudnn_error() {
  std::vector<char> buffer(8192, '\0');
  cudnnGetLastErrorString(buffer.data(), buffer.size());
  std::string text;
  for (const char* c = buffer.data(); *c != '\0'; ++c) {
    if (*c != '\n') {
      text += *c;
    } else if (!text.empty() && c[1] != '\0') {
      text += " | ";
    }
  }
  if (text.size() > 800) text = text.substr(0, 800) + "...";
  return text;
}

[[noreturn]] void cudnn_failed(cudnnStatus_t status, const char* call, const std::string& what) {
  const std::string detail = last_cudnn_error();
  fail("cudnn_attention: {} returned {} for {}{}{}", call, cudnnGetErrorString(status), what,
       detail.empty() ? "" : ": ", detail);
}

void check(cudnnStatus_t status, const char* call, const std::string& what) {
  if (status != CUDNN_STATUS_SUCCESS) cudnn_failed(status, call, what);
}

// --- descriptors: owned, destroyed with the plan that uses them.

struct Descriptor {
  cudnnBackendDescriptor_t d = nullptr;
  Descriptor(cudnnBackendDescriptorType_t type, const std::string& what) {
    check(cudnnBackendCreateDescriptor(type, &d), "cudnnBackendCreateDescriptor", what);
  }
  ~Descriptor() {
    if (d != nullptr) cudnnBackendDestroyDescriptor(d);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
};

// The unique ids of the graph's real (non-virtual) tensors, the keys of the variant pack.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kDsum,  // backward: rowsum(dO * O), f32 [B, H, T, 1]
  kScale,
  kNegInf,
  kOne,
  kFirstVirtual = 100,
};

// One operation graph under construction: creates and finalises descriptors, keeping them alive.
class GraphBuilder {
 public:
  explicit GraphBuilder(std::string what) : what_(std::move(what)) {}

  const std::string& what() const { return what_; }

  // attribute set, its name in the error
  void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, const char* name_str,
           cudnnBackendAttributeType_t type, int64_t count, const void* value) {
    const cudnnStatus_t status = cudnnBackendSetAttribute(d, name, type, count, value);
    if (status != CUDNN_STATUS_SUCCESS)
      cudnn_failed(status, name_str, what_ + " (cudnnBackendSetAttribute)");
  }
  void finalize(cudnnBackendDescriptor_t d, const char* what_desc) {
    const cudnnStatus_t status = cudnnBackendFinalize(d);
    if (status != CUDNN_STATUS_SUCCESS)
      cudnn_failed(status, "cudnnBackendFinalize", fmt::format("{} ({})", what_, what_desc));
  }
  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type) {
    keep_.push_back(std::make_unique<Descriptor>(type, what_));
    return keep_.back()->d;
  }

  // A tensor: real (uid given), virtual (an intermediate cuDNN keeps on chip), or a scalar passed
  // by value at execution. Byte alignment 16, checked on the pointers before each execution.
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type,
                                  const std::array<int64_t, 4>& dims,
                                  const std::array<int64_t, 4>& strides, bool is_virtual,
                                  bool by_value = false) {
    cudnnBackendDescriptor_t t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t alignment = 16;
    set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, "CUDNN_ATTR_TENSOR_DATA_TYPE", CUDNN_TYPE_DATA_TYPE, 1,
        &type);
    set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, "CUDNN_ATTR_TENSOR_DIMENSIONS", CUDNN_TYPE_INT64, 4,
        dims.data());
    set(t, CUDNN_ATTR_TENSOR_STRIDES, "CUDNN_ATTR_TENSOR_STRIDES", CUDNN_TYPE_INT64, 4,
        strides.data());
    set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, "CUDNN_ATTR_TENSOR_UNIQUE_ID", CUDNN_TYPE_INT64, 1, &uid);
    set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, "CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT", CUDNN_TYPE_INT64,
        1, &alignment);
    const bool v = is_virtual, bv = by_value;
    if (v)
      set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, "CUDNN_ATTR_TENSOR_IS_VIRTUAL", CUDNN_TYPE_BOOLEAN, 1,
          &v);
    if (bv)
      set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, "CUDNN_ATTR_TENSOR_IS_BY_VALUE", CUDNN_TYPE_BOOLEAN, 1,
          &bv);
    finalize(t, "tensor");
    return t;
  }
  cudnnBackendDescriptor_t real(int64_t uid, cudnnDataType_t type, const CudnnView& view) {
    return tensor(uid, type, view.dims, view.strides, false);
  }
  cudnnBackendDescriptor_t scalar(int64_t uid) {
    return tensor(uid, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }
  cudnnBackendDescriptor_t virt(cudnnDataType_t type, const std::array<int64_t, 4>& dims,
                                const std::array<int64_t, 4>& strides) {
    return tensor(next_virtual_++, type, dims, strides, true);
  }

  // y = op(x[, b[, t]]) elementwise (b and t broadcast); GEN_INDEX takes the axis it numbers.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t precision, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                 int64_t axis = -1) {
    cudnnBackendDescriptor_t pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    set(pw, CUDNN_ATTR_POINTWISE_MODE, "CUDNN_ATTR_POINTWISE_MODE", CUDNN_TYPE_POINTWISE_MODE, 1,
        &mode);
    set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, "CUDNN_ATTR_POINTWISE_MATH_PREC", CUDNN_TYPE_DATA_TYPE,
        1, &precision);
    if (axis >= 0)
      set(pw, CUDNN_ATTR_POINTWISE_AXIS, "CUDNN_ATTR_POINTWISE_AXIS", CUDNN_TYPE_INT64, 1, &axis);
    finalize(pw, "pointwise descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
        "CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR", CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, "CUDNN_ATTR_OPERATION_POINTWISE_XDESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b != nullptr)
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, "CUDNN_ATTR_OPERATION_POINTWISE_BDESC",
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t != nullptr)
      set(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, "CUDNN_ATTR_OPERATION_POINTWISE_TDESC",
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, "CUDNN_ATTR_OPERATION_POINTWISE_YDESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    add_op(op, "pointwise operation");
  }
  // c = a b, batched over the first two dims, accumulated in f32
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    set(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, "CUDNN_ATTR_MATMUL_COMP_TYPE", CUDNN_TYPE_DATA_TYPE, 1,
        &f32);
    finalize(mm, "matmul descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, "CUDNN_ATTR_OPERATION_MATMUL_ADESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, "CUDNN_ATTR_OPERATION_MATMUL_BDESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, "CUDNN_ATTR_OPERATION_MATMUL_CDESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    set(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, "CUDNN_ATTR_OPERATION_MATMUL_DESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    add_op(op, "matmul operation");
  }
  // y = reduction of x over the dims where y has size 1, in f32
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t red = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    set(red, CUDNN_ATTR_REDUCTION_OPERATOR, "CUDNN_ATTR_REDUCTION_OPERATOR",
        CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    set(red, CUDNN_ATTR_REDUCTION_COMP_TYPE, "CUDNN_ATTR_REDUCTION_COMP_TYPE", CUDNN_TYPE_DATA_TYPE,
        1, &f32);
    finalize(red, "reduction descriptor");
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, "CUDNN_ATTR_OPERATION_REDUCTION_XDESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, "CUDNN_ATTR_OPERATION_REDUCTION_YDESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    set(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, "CUDNN_ATTR_OPERATION_REDUCTION_DESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red);
    add_op(op, "reduction operation");
  }
  // y = x seen with other dims and strides (the transposes of the backward)
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    set(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, "CUDNN_ATTR_OPERATION_RESHAPE_XDESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    set(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, "CUDNN_ATTR_OPERATION_RESHAPE_YDESC",
        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    add_op(op, "reshape operation");
  }

  const std::vector<cudnnBackendDescriptor_t>& ops() const { return ops_; }
  std::vector<std::unique_ptr<Descriptor> > release() { return std::move(keep_); }

 private:
  void add_op(cudnnBackendDescriptor_t op, const char* what_op) {
    finalize(op, what_op);
    ops_.push_back(op);
  }

  std::string what_;
  std::vector<std::unique_ptr<Descriptor> > keep_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

#define GLASS_CUDNN_SET(g, d, attr, type, count, value) (g).set(d, attr, #attr, type, count, value)

// The shapes of the causal score matrix and its row statistics.
struct Scores {
  std::array<int64_t, 4> dims, strides, t_strides;  // [B, H, T, T]; t_strides: the transpose
  std::array<int64_t, 4> row_dims, row_strides;     // [B, H, T, 1]
  Scores(int64_t B, int64_t H, int64_t T)
      : dims{B, H, T, T},
        strides{H * T * T, T * T, T, 1},
        t_strides{H * T * T, T * T, 1, T},
        row_dims{B, H, T, 1},
        row_strides{H * T, T, 1, 1} {}
};

// s (f32 [B, H, T, T]) with the entries above the diagonal (key j > query i) set to -inf:
// keep = row index >= column index, then select s where keep, else the by-value -inf.
cudnnBackendDescriptor_t causal_mask(GraphBuilder& g, const Scores& sc, cudnnBackendDescriptor_t s,
                                     cudnnBackendDescriptor_t neg_inf) {
  cudnnBackendDescriptor_t row = g.virt(CUDNN_DATA_INT32, sc.dims, sc.strides);
  cudnnBackendDescriptor_t col = g.virt(CUDNN_DATA_INT32, sc.dims, sc.strides);
  cudnnBackendDescriptor_t keep = g.virt(CUDNN_DATA_BOOLEAN, sc.dims, sc.strides);
  cudnnBackendDescriptor_t masked = g.virt(CUDNN_DATA_FLOAT, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, nullptr, nullptr, row, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, s, nullptr, nullptr, col, 3);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, s, neg_inf, keep, masked);
  return masked;
}

// Forward: O and stats from Q, K^T, V (see the top of the file).
void build_forward_graph(GraphBuilder& g, int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t D) {
  const CudnnSdpaLayout l = cudnn_sdpa_layout(B, T, H, Hkv, D);
  const Scores sc(B, H, T);
  const cudnnDataType_t io = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  auto q = g.real(kQ, io, l.q), k_t = g.real(kK, io, l.k_t), v = g.real(kV, io, l.v);
  auto o = g.real(kO, io, l.o), stats = g.real(kStats, f32, l.stats);
  auto scale = g.scalar(kScale), neg_inf = g.scalar(kNegInf);
  // 1. S = Q K^T * scale, causally masked
  auto qk = g.virt(f32, sc.dims, sc.strides);
  g.matmul(q, k_t, qk);
  auto scaled = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, qk, scale, nullptr, scaled);
  auto masked = causal_mask(g, sc, scaled, neg_inf);
  // 2. softmax over each row, keeping its log-sum-exp: M = max, E = exp(S - M), Z = sum E
  auto row_max = g.virt(f32, sc.row_dims, sc.row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, row_max);
  auto shifted = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, masked, row_max, nullptr, shifted);
  auto exps = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, shifted, nullptr, nullptr, exps);
  auto row_sum = g.virt(f32, sc.row_dims, sc.row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, row_sum);
  // 3. stats = M + log Z (natural log): the lse output
  auto log_sum = g.virt(f32, sc.row_dims, sc.row_strides);
  g.pointwise(CUDNN_POINTWISE_LOG, f32, row_sum, nullptr, nullptr, log_sum);
  g.pointwise(CUDNN_POINTWISE_ADD, f32, row_max, log_sum, nullptr, stats);
  // 4. P = E / Z, in the io type (the second matmul's A operand), then O = P V
  auto p = g.virt(io, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_DIV, f32, exps, row_sum, nullptr, p);
  g.matmul(p, v, o);
}

// Backward: dQ, dK, dV from Q, K, V, O, dO and stats (see the top of the file). dsum is a real f32
// [B, H, T, 1] tensor the graph writes and reads back (the engines expect it in memory).
void build_backward_graph(GraphBuilder& g, int64_t B, int64_t H, int64_t Hkv, int64_t T,
                          int64_t D) {
  const CudnnSdpaLayout l = cudnn_sdpa_layout(B, T, H, Hkv, D);
  const Scores sc(B, H, T);
  const cudnnDataType_t io = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  auto q = g.real(kQ, io, l.q), k_t = g.real(kK, io, l.k_t), v_t = g.real(kV, io, l.v_t);
  auto o = g.real(kO, io, l.o), d_o = g.real(kDO, io, l.o), stats = g.real(kStats, f32, l.stats);
  auto dq = g.real(kDQ, io, l.q), dk = g.real(kDK, io, l.k), dv = g.real(kDV, io, l.v);
  auto dsum = g.tensor(kDsum, f32, sc.row_dims, sc.row_strides, false);
  auto scale = g.scalar(kScale), neg_inf = g.scalar(kNegInf), one = g.scalar(kOne);
  // dK or dV: straight into `grad` [B, Hkv, T, D] when every key/value head serves one query head;
  // else per query head into an on-chip [B, H, T, D] (contiguous) that a reduction sums into it
  auto per_query_head = [&](cudnnBackendDescriptor_t grad) {
    return H == Hkv ? grad : g.virt(io, {B, H, T, D}, {H * T * D, T * D, D, 1});
  };
  auto sum_groups = [&](cudnnBackendDescriptor_t full, cudnnBackendDescriptor_t grad) {
    if (H != Hkv) g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, grad);
  };
  // 1. Dsum = rowsum(dO * O) (times 1: the dropout-scale slot of the pattern, no dropout here)
  auto d_o_o = g.virt(f32, {B, H, T, D}, {H * T * D, T * D, H * D, 1});
  g.pointwise(CUDNN_POINTWISE_MUL, f32, d_o, o, nullptr, d_o_o);
  auto dsum_raw = g.virt(f32, sc.row_dims, sc.row_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_o, dsum_raw);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, dsum_raw, one, nullptr, dsum);
  // 2. P = exp(Q K^T * scale - stats), causally masked: the forward's P, recomputed from the lse
  auto qk = g.virt(f32, sc.dims, sc.strides);
  g.matmul(q, k_t, qk);
  auto scaled = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, qk, scale, nullptr, scaled);
  auto centred = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, scaled, stats, nullptr, centred);
  auto masked = causal_mask(g, sc, centred, neg_inf);
  auto p = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_EXP, f32, masked, nullptr, nullptr, p);
  // 3. dV = P^T dO
  auto p_t = g.virt(io, sc.dims, sc.t_strides);
  g.reshape(p, p_t);
  auto dv_full = per_query_head(dv);
  g.matmul(p_t, d_o, dv_full);
  sum_groups(dv_full, dv);
  // 4. dS = (dO V^T - Dsum) * P * scale
  auto dp = g.virt(f32, sc.dims, sc.strides);
  g.matmul(d_o, v_t, dp);
  auto dp_centred = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_SUB, f32, dp, dsum, nullptr, dp_centred);
  auto ds_unscaled = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, dp_centred, p, nullptr, ds_unscaled);
  auto ds = g.virt(f32, sc.dims, sc.strides);
  g.pointwise(CUDNN_POINTWISE_MUL, f32, ds_unscaled, scale, nullptr, ds);
  // 5. dK = dS^T Q
  auto ds_t = g.virt(io, sc.dims, sc.t_strides);
  g.reshape(ds, ds_t);
  auto dk_full = per_query_head(dk);
  g.matmul(ds_t, q, dk_full);
  sum_groups(dk_full, dk);
  // 6. dQ = dS K, K being K^T seen transposed back
  auto k = g.virt(io, l.k.dims, l.k.strides);
  g.reshape(k_t, k);
  g.matmul(ds, k, dq);
}

// The attributes whose enumerators cuDNN 9 marks deprecated (in favour of device-property
// descriptors that older 9.x runtimes lack); every 9.x runtime still takes the handle.
constexpr auto kOperationGraphHandle = static_cast<cudnnBackendAttributeName_t>(800);
constexpr auto kExecutionPlanHandle = static_cast<cudnnBackendAttributeName_t>(400);

// A finalised plan and everything it refers to.
struct Plan {
  std::vector<std::unique_ptr<Descriptor> > descriptors;
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace_bytes = 0;
  bool deterministic = true;
};

// Engine configurations for the graph, heuristics mode A first, then the fallback list; the first
// that finalises into a plan wins (heuristics order: fastest first). Among them, engines noted
// non-deterministic are skipped while a deterministic one exists.
std::unique_ptr<Plan> make_plan(cudnnHandle_t handle, GraphBuilder& g) {
  auto plan = std::make_unique<Plan>();
  cudnnBackendDescriptor_t graph = g.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  GLASS_CUDNN_SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                  static_cast<int64_t>(g.ops().size()), g.ops().data());
  g.set(graph, kOperationGraphHandle, "CUDNN_ATTR_OPERATIONGRAPH_HANDLE", CUDNN_TYPE_HANDLE, 1,
        &handle);
  g.finalize(graph, "operation graph");

  std::vector<std::string> tried;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    cudnnBackendDescriptor_t heur = g.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    GLASS_CUDNN_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                    1, &graph);
    GLASS_CUDNN_SET(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (const cudnnStatus_t status = cudnnBackendFinalize(heur); status != CUDNN_STATUS_SUCCESS) {
      tried.push_back(fmt::format("heuristics mode {}: not finalised, {} ({})",
                                  static_cast<int>(mode), cudnnGetErrorString(status),
                                  last_cudnn_error()));
      continue;
    }
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
          "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS, count)", g.what());
    std::vector<cudnnBackendDescriptor_t> configs;
    for (int64_t i = 0; i < count; ++i)
      configs.push_back(g.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    int64_t got = 0;
    if (count > 0)
      check(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, configs.data()),
            "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)", g.what());
    tried.push_back(fmt::format("heuristics mode {}: {} configurations{}", static_cast<int>(mode),
                                got, got == 0 ? " (" + last_cudnn_error() + ")" : ""));
    cudnnBackendDescriptor_t nondeterministic_plan = nullptr;
    for (int64_t i = 0; i < got; ++i) {
      // this configuration's engine and its numerical notes
      cudnnBackendDescriptor_t engine = g.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
      int64_t n = 0;
      bool nondeterministic = false;
      if (cudnnBackendGetAttribute(configs[i], CUDNN_ATTR_ENGINECFG_ENGINE,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                   &engine) == CUDNN_STATUS_SUCCESS) {
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        int64_t n_notes = 0;
        if (cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                     CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                     &n_notes, notes) == CUDNN_STATUS_SUCCESS)
          for (int64_t j = 0; j < n_notes; ++j)
            nondeterministic |= notes[j] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC;
      }
      cudnnBackendDescriptor_t candidate = g.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      g.set(candidate, kExecutionPlanHandle, "CUDNN_ATTR_EXECUTION_PLAN_HANDLE", CUDNN_TYPE_HANDLE,
            1, &handle);
      GLASS_CUDNN_SET(g, candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[i]);
      const cudnnStatus_t status = cudnnBackendFinalize(candidate);
      if (status != CUDNN_STATUS_SUCCESS) {
        tried.push_back(
            fmt::format("config {}: {} ({})", i, cudnnGetErrorString(status), last_cudnn_error()));
        continue;
      }
      if (nondeterministic) {
        if (nondeterministic_plan == nullptr) nondeterministic_plan = candidate;
        continue;
      }
      plan->plan = candidate;
      break;
    }
    if (plan->plan == nullptr && nondeterministic_plan != nullptr) {
      plan->plan = nondeterministic_plan;
      plan->deterministic = false;
    }
    if (plan->plan != nullptr) break;
  }
  GLASS_CHECK(plan->plan != nullptr,
              "cudnn_attention: no cuDNN engine runs the graph for {} (cuDNN {}; {}); "
              "CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr makes cuDNN say more",
              g.what(), cudnnGetVersion(), fmt::join(tried, "; "));
  check(cudnnBackendGetAttribute(plan->plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, nullptr, &plan->workspace_bytes),
        "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)", g.what());
  plan->descriptors = g.release();
  return plan;
}

// One cuDNN handle per device (created with that device current: the tensors' allocator made it
// so), and the plans built for it, under one lock: cuDNN handles are not for concurrent use, so
// the stream is set and the plan executed while it is held.
struct DeviceState {
  cudnnHandle_t handle = nullptr;
  std::map<std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t>, std::unique_ptr<Plan> >
      plans;
};
std::mutex& state_mutex() {
  static auto* m = new std::mutex;  // never destroyed: plans outlive static destruction order
  return *m;
}
DeviceState& device_state(Device device, const std::string& what) {
  static auto* states = new std::map<int, DeviceState>;
  DeviceState& st = (*states)[device.index];
  if (st.handle == nullptr) {
    refuse_in_graph_capture(device, "cudnn_attention's first use on a device",
                            "cudnnCreate is not a capturable call; run one eager step first");
    const size_t version = cudnnGetVersion();
    GLASS_CHECK(version >= 90000,
                "cudnn_attention: the cuDNN library loaded is {} (built with {}); "
                "the SDPA graphs need cuDNN 9",
                version, CUDNN_VERSION);
    check(cudnnCreate(&st.handle), "cudnnCreate", what);
  }
  return st;
}

// The plan for this direction and shape: built on first use, then reused.
Plan& plan_for(DeviceState& st, Device device, bool backward, const CudnnAttentionShape& s,
               const std::string& what) {
  auto& slot = st.plans[{backward, s.B, s.H, s.Hkv, s.T, s.D}];
  if (slot == nullptr) {
    refuse_in_graph_capture(device, "cudnn_attention on a shape not seen before",
                            "building its plan compiles and loads kernels; run one eager step "
                            "with this shape first");
    GraphBuilder g(what);
    if (backward)
      build_backward_graph(g, s.B, s.H, s.Hkv, s.T, s.D);
    else
      build_forward_graph(g, s.B, s.H, s.Hkv, s.T, s.D);
    slot = make_plan(st.handle, g);
    if (!slot->deterministic)
      log_warning(fmt::format(
          "cudnn_attention: cuDNN {} has no deterministic engine for {}; the one in use may give "
          "different bits for the same inputs (--attention flash is deterministic)",
          cudnnGetVersion(), what));
  }
  return *slot;
}

// cuDNN was told every real tensor is 16-byte aligned.
void check_aligned(const char* name, const void* p, const std::string& what) {
  GLASS_CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0,
              "cudnn_attention: {} at {} is not 16-byte aligned for {} (the views of q, k and v "
              "start at multiples of C and D elements: C and D must be multiples of 8)",
              name, p, what);
}

// The value the causal mask writes into S: -inf from cuDNN 9.10 on; before, the lowest finite
// float, as NVIDIA's frontend does ("older cuDNN prefers lowest for the softmax mask": a row tile
// with every entry masked would otherwise take exp(-inf - (-inf))).
float causal_mask_value() {
  return cudnnGetVersion() < 91000 ? std::numeric_limits<float>::lowest()
                                   : -std::numeric_limits<float>::infinity();
}

// What the loaded cuDNN's SDPA does not take, said before any graph is built (NVIDIA's frontend
// refuses the same).
void check_cudnn_supports(bool backward, const CudnnAttentionShape& s, const std::string& what) {
  const size_t version = cudnnGetVersion();
  GLASS_CHECK(version != 91000 && version != 91001,
              "{}: cuDNN {} has known wrong results in SDPA; use 9.10.2 or newer", what, version);
  if (!backward) return;
  GLASS_CHECK(s.T > 1, "{}: T = 1 (a single query and key) has no cuDNN SDPA backward engine",
              what);
  GLASS_CHECK(version > 91500 || s.T % 128 == 0,
              "{}: cuDNN {} needs T a multiple of 128 in SDPA backward without a padding mask "
              "(cuDNN newer than 9.15.0 takes any T)",
              what, version);
}

// bf16 copies of f32 tensors, or the tensors themselves when already bf16.
Tensor as_bf16(const Tensor& t) {
  if (t.dtype() == DType::bf16) return t;
  Tensor b = Tensor::empty(t.shape(), DType::bf16, t.device());
  cast(t, b);
  return b;
}
Tensor bf16_like(const Tensor& t) {
  return t.dtype() == DType::bf16 ? t : Tensor::empty(t.shape(), DType::bf16, t.device());
}

// Runs the plan with the variant pack {uid -> pointer}, inside the launch gateway.
void execute(DeviceState& st, Plan& plan, const std::vector<std::pair<int64_t, void*> >& pointers,
             const Tensor& on, const char* kernel, double flops, double bytes,
             const std::string& what) {
  const Tensor workspace =
      plan.workspace_bytes > 0
          ? Tensor::empty({(plan.workspace_bytes + 3) / 4}, DType::f32, on.device())
          : Tensor();
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (const auto& [uid, ptr] : pointers) {
    uids.push_back(uid);
    ptrs.push_back(ptr);
  }
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, what);
  void* ws = workspace.defined() ? workspace.raw_data() : nullptr;
  auto set = [&](cudnnBackendAttributeName_t name, const char* name_str,
                 cudnnBackendAttributeType_t type, int64_t count, const void* value) {
    const cudnnStatus_t status = cudnnBackendSetAttribute(pack.d, name, type, count, value);
    if (status != CUDNN_STATUS_SUCCESS) cudnn_failed(status, name_str, what + " (variant pack)");
  };
  set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, "CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS", CUDNN_TYPE_INT64,
      static_cast<int64_t>(uids.size()), uids.data());
  set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, "CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS",
      CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()), ptrs.data());
  set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, "CUDNN_ATTR_VARIANT_PACK_WORKSPACE", CUDNN_TYPE_VOID_PTR,
      1, &ws);
  check(cudnnBackendFinalize(pack.d), "cudnnBackendFinalize(variant pack)", what);

  LaunchInfo info;
  info.kernel = kernel;
  info.device = on.device();
  info.flops = flops;
  info.bytes = bytes;
  // cuDNN's fused attention runs its products on the tensor cores (bf16 here).
  info.unit = on.dtype() == DType::bf16 ? ComputeUnit::tensor_core_bf16 : ComputeUnit::cuda_core;
  const cudaStream_t stream = launch_stream(info.device);
  info.stream = launch_stream_id(info.device);
  info.native_stream = stream;
  check(cudnnSetStream(st.handle, stream), "cudnnSetStream", what);
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  glass::launch(info, [&] { status = cudnnBackendExecute(st.handle, plan.plan, pack.d); });
  check(status, "cudnnBackendExecute", what);
}

// FLOPs over the causal triangle (T(T+1)/2 entries per (batch, head)): 2D per entry per T x T x D
// product (2 forward; 5 backward: S recomputed, dV, dP, dK, dQ) plus the softmax's few per entry.
double causal_flops(const CudnnAttentionShape& s, int products, int per_entry) {
  const double entries = static_cast<double>(s.B * s.H) * static_cast<double>(s.T * (s.T + 1) / 2);
  return entries * (products * 2.0 * static_cast<double>(s.D) + per_entry);
}

}  // namespace

bool cudnn_attention_available() { return true; }

int64_t cudnn_attention_graph_ops(bool backward, int64_t B, int64_t T, int64_t n_head,
                                  int64_t n_kv_head, int64_t head_dim) {
  GraphBuilder g(fmt::format("{} graph (B={} H={} Hkv={} T={} D={})",
                             backward ? "backward" : "forward", B, n_head, n_kv_head, T, head_dim));
  if (backward)
    build_backward_graph(g, B, n_head, n_kv_head, T, head_dim);
  else
    build_forward_graph(g, B, n_head, n_kv_head, T, head_dim);
  return static_cast<int64_t>(g.ops().size());
}

void cudnn_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale) {
  const char* kernel = "cudnn_attention_forward";
  const CudnnAttentionShape s(kernel, qkv, out, lse, n_head, n_kv_head);
  if (s.B == 0 || s.T == 0) return;
  const std::string what = fmt::format("{} ({})", kernel, s.describe());
  check_cudnn_supports(false, s, what);
  // bf16 operands (f32 is converted, see the top of the file)
  const Tensor qkv16 = as_bf16(qkv), out16 = bf16_like(out);
  auto* base = static_cast<char*>(qkv16.raw_data());
  const CudnnSdpaLayout l = cudnn_sdpa_layout(s.B, s.T, s.H, s.Hkv, s.D);
  void* q = base + 2 * l.q.offset;
  void* k = base + 2 * l.k.offset;
  void* v = base + 2 * l.v.offset;
  for (auto [name, p] : {std::pair<const char*, void*>{"q", q},
                         {"k", k},
                         {"v", v},
                         {"out", out16.raw_data()},
                         {"lse", lse.raw_data()}})
    check_aligned(name, p, what);
  float scale_value = static_cast<float>(scale);
  float neg_inf = causal_mask_value();
  {
    const std::lock_guard<std::mutex> lock(state_mutex());
    DeviceState& st = device_state(qkv.device(), what);
    Plan& plan = plan_for(st, qkv.device(), false, s, what);
    // qkv read and out written (bf16), lse written (f32)
    const double bytes = 2.0 * static_cast<double>(s.B * s.T * (s.W + s.C)) +
                         4.0 * static_cast<double>(s.B * s.H * s.T);
    execute(st, plan,
            {{kQ, q},
             {kK, k},
             {kV, v},
             {kO, out16.raw_data()},
             {kStats, lse.raw_data()},
             {kScale, &scale_value},
             {kNegInf, &neg_inf}},
            qkv, "cudnn_sdpa_forward", causal_flops(s, 2, 5), bytes, what);
  }
  if (!out16.is_same(out)) cast(out16, out);
}

void cudnn_attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                              const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                              int64_t n_kv_head, double scale) {
  const char* kernel = "cudnn_attention_backward";
  const CudnnAttentionShape s(kernel, qkv, out, lse, n_head, n_kv_head);
  s.check_backward(kernel, qkv, dout, dqkv);
  if (s.B == 0 || s.T == 0) return;
  const std::string what = fmt::format("{} ({})", kernel, s.describe());
  check_cudnn_supports(true, s, what);
  const Tensor qkv16 = as_bf16(qkv), out16 = as_bf16(out), dout16 = as_bf16(dout);
  const Tensor dqkv16 = bf16_like(dqkv);
  // rowsum(dO * O) per (batch, head, row): written and read by the graph
  const Tensor dsum = Tensor::empty({s.B, s.H, s.T}, DType::f32, qkv.device());
  const CudnnSdpaLayout l = cudnn_sdpa_layout(s.B, s.T, s.H, s.Hkv, s.D);
  auto* in = static_cast<char*>(qkv16.raw_data());
  auto* grad = static_cast<char*>(dqkv16.raw_data());
  void* q = in + 2 * l.q.offset;
  void* k = in + 2 * l.k.offset;
  void* v = in + 2 * l.v.offset;
  void* dq = grad + 2 * l.q.offset;
  void* dk = grad + 2 * l.k.offset;
  void* dv = grad + 2 * l.v.offset;
  for (auto [name, p] : {std::pair<const char*, void*>{"q", q},
                         {"k", k},
                         {"v", v},
                         {"dq", dq},
                         {"dk", dk},
                         {"dv", dv},
                         {"out", out16.raw_data()},
                         {"dout", dout16.raw_data()},
                         {"lse", lse.raw_data()},
                         {"rowsum(dO * O) scratch", dsum.raw_data()}})
    check_aligned(name, p, what);
  float scale_value = static_cast<float>(scale);
  float neg_inf = causal_mask_value();
  float one = 1.0f;
  {
    const std::lock_guard<std::mutex> lock(state_mutex());
    DeviceState& st = device_state(qkv.device(), what);
    Plan& plan = plan_for(st, qkv.device(), true, s, what);
    // qkv, out, dout read, dqkv written (bf16); lse read, dsum written and read (f32)
    const double bytes = 2.0 * static_cast<double>(2 * s.B * s.T * (s.W + s.C)) +
                         4.0 * 3.0 * static_cast<double>(s.B * s.H * s.T);
    execute(st, plan,
            {{kQ, q},
             {kK, k},
             {kV, v},
             {kO, out16.raw_data()},
             {kDO, dout16.raw_data()},
             {kStats, lse.raw_data()},
             {kDQ, dq},
             {kDK, dk},
             {kDV, dv},
             {kDsum, dsum.raw_data()},
             {kScale, &scale_value},
             {kNegInf, &neg_inf},
             {kOne, &one}},
            qkv, "cudnn_sdpa_backward", causal_flops(s, 5, 4), bytes, what);
  }
  if (!dqkv16.is_same(dqkv)) cast(dqkv16, dqkv);
}

#endif  // GLASS_CUDNN_ATTENTION

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
