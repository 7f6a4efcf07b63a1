// cuDNN's fused flash attention (kernels/cuda/cudnn_attention.cu): causal scaled-dot-product
// attention, forward and backward, as cuDNN 9 operation graphs built with backend descriptors.
// It reads and writes the engine's fused layouts directly, with the same contract as the flash
// kernel (kernels/cuda/flash_attention.cu):
//
//   qkv  [B, T, (H + 2 Hkv) D], H = n_head, Hkv = n_kv_head: query head h at columns h*D.., key
//        head j at (H + j)*D.., value head j at (H + Hkv + j)*D..; query head h reads key/value
//        head h / (H / Hkv) (grouped-query attention; Hkv = H is qkv [B, T, 3C])
//   out  [B, T, C]:  head h at columns h*D..;  C = H D
//   lse  f32 [B, n_head, T]: per-row natural log-sum-exp of the scaled, causally masked scores
//   dout [B, T, C] -> dqkv like qkv (overwritten)
//
// This header also holds the parts that need no GPU, so that the host tests check them: the
// argument checks and the strided 4-D views through which cuDNN sees q, k, v, o and the stats.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "engine/tensor.h"
#include "kernels/cuda/build.h"
#include "kernels/cuda/cuda_kernels.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

// A 4-D view of one of the tensors above, as a cuDNN tensor descriptor states it: dims, strides in
// elements, and the element offset of the view's first element from the tensor's first element.
struct CudnnView {
  std::array<int64_t, 4> dims{}, strides{};
  int64_t offset = 0;
};

// The views the SDPA graphs use, over the fused tensors without copies. cuDNN's graph multiplies
// Q [B, H, T, D] by K^T [B, Hkv, D, T] and P [B, H, T, T] by V [B, Hkv, T, D] (a key/value head
// serving H / Hkv query heads: cuDNN's SDPA engines take grouped-query attention from K and V
// having fewer heads than Q); its backward also reads V^T [B, Hkv, D, T]. A transposed view is the
// same memory with the last two dims and strides swapped.
struct CudnnSdpaLayout {
  CudnnView q, k, k_t, v, v_t;  // in qkv (and dq, dk, dv in dqkv)
  CudnnView o;                  // in out (and dout)
  CudnnView stats;              // in lse: [B, H, T, 1], cuDNN's "softmax stats"
};

inline CudnnSdpaLayout cudnn_sdpa_layout(int64_t B, int64_t T, int64_t n_head, int64_t n_kv_head,
                                         int64_t head_dim) {
  const int64_t H = n_head, Hkv = n_kv_head, D = head_dim, C = H * D, W = (H + 2 * Hkv) * D;
  // Element (b, h, t, d) of q is qkv[b][t][h*D + d]: strides W*T (batch), D (head), W (row), 1;
  // k and v the same from columns H*D and (H + Hkv)*D.
  const std::array<int64_t, 4> bhtd_in_qkv{T * W, D, W, 1};
  auto transposed = [](CudnnView v) {
    std::swap(v.dims[2], v.dims[3]);
    std::swap(v.strides[2], v.strides[3]);
    return v;
  };
  CudnnSdpaLayout l;
  l.q = {{B, H, T, D}, bhtd_in_qkv, 0};
  l.k = {{B, Hkv, T, D}, bhtd_in_qkv, C};
  l.v = {{B, Hkv, T, D}, bhtd_in_qkv, C + Hkv * D};
  l.k_t = transposed(l.k);
  l.v_t = transposed(l.v);
  // Element (b, h, t, d) of o is out[b][t][h*D + d].
  l.o = {{B, H, T, D}, {T * C, D, C, 1}, 0};
  // lse [B, H, T] contiguous, seen with a trailing dimension of 1 (the reduced key axis).
  l.stats = {{B, H, T, 1}, {H * T, T, 1, 1}, 0};
  return l;
}

// The shapes of one call, checked: qkv [B, T, (n_head + 2 n_kv_head) D] and out [B, T, C]
// contiguous, of one dtype (bf16, or f32, which is converted to bf16 around the cuDNN call), lse
// contiguous f32 [B, n_head, T], all on one device; n_kv_head divides n_head; C = n_head * D with D
// a multiple of 8 in 8..128 (what cuDNN's fused kernels take). The backward adds dout like out and
// dqkv like qkv.
struct CudnnAttentionShape {
  int64_t B = 0, T = 0, C = 0, H = 0, Hkv = 0, D = 0, W = 0;  // W: qkv's row, (H + 2 Hkv) D
  DType dtype = DType::f32;

  CudnnAttentionShape(const char* kernel, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                      int64_t n_head, int64_t n_kv_head) {
    GLASS_CHECK(n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0,
                "{}: n_kv_head {} must divide n_head {} (both positive)", kernel, n_kv_head,
                n_head);
    GLASS_CHECK(qkv.dim() == 3 && qkv.size(2) > 0 && qkv.size(2) % (n_head + 2 * n_kv_head) == 0,
                "{}: qkv {} must be [B, T, (n_head + 2 n_kv_head) D] = [B, T, ({} + 2 * {}) D]",
                kernel, qkv.describe(), n_head, n_kv_head);
    B = qkv.size(0);
    T = qkv.size(1);
    W = qkv.size(2);
    dtype = qkv.dtype();
    H = n_head;
    Hkv = n_kv_head;
    D = W / (H + 2 * Hkv);
    C = H * D;
    GLASS_CHECK(dtype == DType::f32 || dtype == DType::bf16,
                "{}: qkv {} is {}; cuDNN's fused attention takes bf16 (f32 is converted)", kernel,
                qkv.describe(), dtype_name(dtype));
    GLASS_CHECK(D % 8 == 0 && D >= 8 && D <= 128,
                "{}: head dim D = C / n_head = {} (qkv {}, n_head {}); cuDNN's fused attention "
                "takes multiples of 8 up to 128",
                kernel, D, qkv.describe(), n_head);
    like(kernel, "qkv", qkv, {B, T, W}, dtype, qkv);
    like(kernel, "out", out, {B, T, C}, dtype, qkv);
    like(kernel, "lse", lse, {B, H, T}, DType::f32, qkv);
  }

  // dout like out and dqkv like qkv.
  void check_backward(const char* kernel, const Tensor& qkv, const Tensor& dout,
                      const Tensor& dqkv) const {
    like(kernel, "dout", dout, {B, T, C}, dtype, qkv);
    like(kernel, "dqkv", dqkv, {B, T, W}, dtype, qkv);
  }

  std::string describe() const {
    return fmt::format("B={} H={} Hkv={} T={} D={} {}", B, H, Hkv, T, D, dtype_name(dtype));
  }

 private:
  static void like(const char* kernel, const char* name, const Tensor& t, const Shape& shape,
                   DType dtype, const Tensor& qkv) {
    GLASS_CHECK(t.defined() && t.shape() == shape && t.is_contiguous() && t.dtype() == dtype &&
                    t.device() == qkv.device(),
                "{}: {} {} must be contiguous {} {} on {} (qkv {})", kernel, name,
                t.defined() ? t.describe() : std::string("(undefined)"), dtype_name(dtype),
                shape_str(shape), qkv.device().str(), qkv.describe());
  }
};

// Whether this build of kernels/cuda can run cuDNN's attention: nvcc's build with cuDNN found at
// configure time. The emu build and a cuda build without cuDNN refuse with one line saying why.
bool cudnn_attention_available();

// Builds the forward or backward operation graph's descriptors for a shape, each finalised by
// cuDNN (which validates it), and returns how many operations the graph has; nothing runs. Tensor
// and operation descriptors need no GPU, so the host tests check the graphs with it; combining
// them into an operation graph and a plan needs a cuDNN handle, i.e. a GPU.
int64_t cudnn_attention_graph_ops(bool backward, int64_t B, int64_t T, int64_t n_head,
                                  int64_t n_kv_head, int64_t head_dim);

// cudnn_attention_forward and cudnn_attention_backward, the kernels of this file, are declared by
// the kernel list (kernels/kernel_list.inc, through cuda_kernels.h).

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
