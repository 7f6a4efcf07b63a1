// causal_attention: softmax(q k^T / sqrt(D), causal mask) v, forward and backward side by side.
// - on q [B, H, T, D], k and v [B, Hkv, T, D]: the probs-based kernels, probabilities
//   [B, H, T, T] saved for backward;
// - on the fused qkv layout [B, T, (H + 2 Hkv) D] (multi-head: Hkv = H, [B, T, 3C]): the same op
//   with the kernel behind it chosen here (naive, flash, flash-simt, flash-mma or cudnn, see
//   AttentionKernel in autograd/ops.h) and nowhere else.
// Grouped-query attention (Hkv < H): query head h reads key/value head h / (H / Hkv); backward
// sums the gradients of a key/value head's query heads into its dK and dV (inside the kernels,
// in a fixed order).
#include <cmath>
#include <string>

#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "engine/device_runtime.h"
#include "kernels/backend.h"

namespace glass {

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(q.dim() == 4 && q.size(3) > 0, "causal_attention: q {} must be [B, H, T, D], D > 0",
              q.describe());
  GLASS_CHECK(k.dim() == 4 && k.size(0) == q.size(0) && k.size(2) == q.size(2) &&
                  k.size(3) == q.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
              "causal_attention: k {} must be [B, Hkv, T, D] with Hkv dividing H for q {} "
              "(n_kv_head {} must divide n_head {})",
              k.describe(), q.describe(), k.dim() == 4 ? k.size(1) : 0, q.size(1));
  GLASS_CHECK(v.shape() == k.shape() && k.dtype() == q.dtype() && v.dtype() == q.dtype() &&
                  k.device() == q.device() && v.device() == q.device(),
              "causal_attention: q {}, k {} and v {} must share dtype and device, k and v their "
              "shape",
              q.describe(), k.describe(), v.describe());
  Tensor qc = contiguous(q), kc = contiguous(k), vc = contiguous(v);
  OpScope op("attention", {qc, kc, vc});
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const int64_t T = q.size(2);
  Tensor out = empty_like(qc);
  Tensor probs = Tensor::empty({q.size(0), q.size(1), T, T}, q.dtype(), q.device());
  kernels::backend(qc).attention_forward(qc, kc, vc, out, probs, scale);
  // dV = P^T dO, dS = P (dO V^T - rowsum(dO V^T P)), dQ = dS K s, dK = dS^T Q s (dK and dV summed
  // over the query heads of each key/value head)
  return op.finish(out, {qc, kc, vc, probs}, [scale](Node& n, const Tensor& dout) -> InputGrads {
    const Tensor &q = n.saved[0], &k = n.saved[1], &v = n.saved[2], &probs = n.saved[3];
    Tensor dq = empty_like(q), dk = empty_like(k), dv = empty_like(v);
    kernels::backend(q).attention_backward(q, k, v, probs, contiguous(dout), dq, dk, dv, scale);
    return {dq, dk, dv};
  });
}

const char* attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::automatic:
      return "auto";
    case AttentionKernel::naive:
      return "naive";
    case AttentionKernel::flash:
      return "flash";
    case AttentionKernel::flash_simt:
      return "flash-simt";
    case AttentionKernel::flash_mma:
      return "flash-mma";
    case AttentionKernel::cudnn:
      return "cudnn";
  }
  return "?";
}

AttentionKernel parse_attention_kernel(const std::string& name) {
  for (AttentionKernel k :
       {AttentionKernel::automatic, AttentionKernel::naive, AttentionKernel::flash,
        AttentionKernel::flash_simt, AttentionKernel::flash_mma, AttentionKernel::cudnn})
    if (name == attention_kernel_name(k)) return k;
  fail("unknown attention kernel '{}' (naive, flash, flash-simt, flash-mma, cudnn or auto)", name);
}

AttentionKernel resolve_attention_kernel(AttentionKernel kernel, Device device, DType dtype,
                                         int64_t head_dim) {
  if (kernel != AttentionKernel::automatic && kernel != AttentionKernel::flash) return kernel;
  // cpu's flash kernel takes any head dim and dtype
  if (!capabilities(device).cuda_kernels) return AttentionKernel::flash;
  if (dtype == DType::bf16 && kernels::flash_mma_head_dim_ok(head_dim))
    return AttentionKernel::flash_mma;
  // an explicit flash stays the CUDA-core kernel (which names the head dim it refuses)
  if (kernel == AttentionKernel::flash || kernels::flash_head_dim_ok(head_dim))
    return AttentionKernel::flash_simt;
  return AttentionKernel::naive;
}

void check_attention_kernel(AttentionKernel kernel, Device device, DType dtype, int64_t head_dim) {
  const char* name = attention_kernel_name(kernel);
  switch (kernel) {
    case AttentionKernel::cudnn:
      GLASS_CHECK(capabilities(device).cudnn_attention,
                  "cudnn attention runs on cuda only (not on {})", device.str());
      GLASS_CHECK(kernels::backend(device).cudnn_attention_forward != nullptr,
                  "cudnn attention is not built");
      return;
    case AttentionKernel::flash_simt:
    case AttentionKernel::flash_mma:
      GLASS_CHECK(capabilities(device).cuda_kernels,
                  "{} attention runs on emu and cuda only (cpu: --attention flash or naive)", name);
      break;
    default:
      return;
  }
  if (kernel == AttentionKernel::flash_simt) {
    GLASS_CHECK(kernels::flash_head_dim_ok(head_dim),
                "flash-simt attention takes head dims that are multiples of 8 in {}..{}, not {}",
                kernels::kFlashMinHeadDim, kernels::kFlashMaxHeadDim, head_dim);
    return;
  }
  GLASS_CHECK(dtype == DType::bf16,
              "flash-mma attention runs in bf16 only, not {} (f32: --attention flash-simt)",
              dtype_name(dtype));
  GLASS_CHECK(kernels::flash_mma_head_dim_ok(head_dim),
              "flash-mma attention takes head dims 32, 64 and 128, not {}", head_dim);
}

namespace {

// The heads of qkv [B, T, (H + 2 Hkv) D] that start at column `first_col`, `heads` of them, seen
// as [B, heads, T, D] (no copy): q at column 0 (H heads), k at H D and v at (H + Hkv) D (Hkv
// each).
Tensor heads_of(const Tensor& qkv, int64_t first_col, int64_t heads, int64_t D) {
  const int64_t T = qkv.size(1), W = qkv.size(2);
  return qkv.as_strided({qkv.size(0), heads, T, D}, {T * W, D, W, 1}, qkv.offset() + first_col);
}

// y [B, T, C] seen as heads [B, H, T, D] (no copy).
Tensor heads_of_output(const Tensor& y, int64_t H) {
  const int64_t T = y.size(1), C = y.size(2), D = C / H;
  return y.as_strided({y.size(0), H, T, D}, {T * C, D, C, 1}, y.offset());
}

// The naive kernel on the qkv layout: q [B, H, T, D], k and v [B, Hkv, T, D] copied out for the
// probs-based kernels, the output and the gradients copied back (the copies are visible launches).
Tensor naive_attention(const Tensor& qkv, int64_t H, int64_t Hkv, double scale, OpScope& op) {
  const kernels::Backend& be = kernels::backend(qkv);
  const int64_t B = qkv.size(0), T = qkv.size(1), D = qkv.size(2) / (H + 2 * Hkv);
  const int64_t first_col[3] = {0, H * D, (H + Hkv) * D}, heads[3] = {H, Hkv, Hkv};
  std::vector<Tensor> parts;
  for (int part = 0; part < 3; ++part) {
    const Tensor view = heads_of(qkv, first_col[part], heads[part], D);
    parts.push_back(Tensor::empty(view.shape(), qkv.dtype(), qkv.device()));
    be.copy(view, parts.back());
  }
  const Tensor probs = Tensor::empty({B, H, T, T}, qkv.dtype(), qkv.device());
  const Tensor out_heads = empty_like(parts[0]);
  be.attention_forward(parts[0], parts[1], parts[2], out_heads, probs, scale);
  Tensor out = Tensor::empty({B, T, H * D}, qkv.dtype(), qkv.device());
  be.copy(out_heads, heads_of_output(out, H));
  // the probs rule above, the gradients copied back into dqkv's layout
  return op.finish(out, {parts[0], parts[1], parts[2], probs},
                   [H, D, scale, first_col, heads, qkv_shape = qkv.shape()](
                       Node& n, const Tensor& dout) -> InputGrads {
                     const Tensor &q = n.saved[0], &k = n.saved[1], &v = n.saved[2];
                     const kernels::Backend& be = kernels::backend(q);
                     const Tensor dheads = empty_like(q);
                     be.copy(heads_of_output(contiguous(dout), H), dheads);
                     const Tensor dq = empty_like(q), dk = empty_like(k), dv = empty_like(v);
                     be.attention_backward(q, k, v, n.saved[3], dheads, dq, dk, dv, scale);
                     Tensor dqkv = Tensor::empty(qkv_shape, q.dtype(), q.device());
                     const Tensor* grads[3] = {&dq, &dk, &dv};
                     for (int part = 0; part < 3; ++part)
                       be.copy(*grads[part], heads_of(dqkv, first_col[part], heads[part], D));
                     return {dqkv};
                   });
}

using FusedForward = void (*)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                              int64_t n_head, int64_t n_kv_head, double scale);
using FusedBackward = void (*)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                               const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                               int64_t n_kv_head, double scale);

// flash and cudnn: qkv read in place, out [B, T, C] and lse [B, H, T] saved for backward.
Tensor fused_attention(const Tensor& qkv, int64_t H, int64_t Hkv, double scale,
                       FusedForward forward, FusedBackward backward, OpScope& op) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / (H + 2 * Hkv) * H;
  Tensor out = Tensor::empty({B, T, C}, qkv.dtype(), qkv.device());
  const Tensor lse = Tensor::empty({B, H, T}, DType::f32, qkv.device());
  forward(qkv, out, lse, H, Hkv, scale);
  // P recomputed from lse per tile: dS = P (dP - rowsum(dO out)), then dQ, dK, dV as above
  return op.finish(out, {qkv, out, lse},
                   [H, Hkv, scale, backward](Node& n, const Tensor& dout) -> InputGrads {
                     const Tensor &qkv = n.saved[0], &out = n.saved[1], &lse = n.saved[2];
                     Tensor dqkv = empty_like(qkv);
                     backward(qkv, out, lse, contiguous(dout), dqkv, H, Hkv, scale);
                     return {dqkv};
                   });
}

}  // namespace

Tensor causal_attention(const Tensor& qkv, int64_t n_head, AttentionKernel kernel, CallSite site) {
  return causal_attention(qkv, n_head, n_head, kernel, site);
}

Tensor causal_attention(const Tensor& qkv, int64_t n_head, int64_t n_kv_head,
                        AttentionKernel kernel, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0,
              "causal_attention: n_kv_head {} must divide n_head {} (both positive)", n_kv_head,
              n_head);
  const int64_t heads = n_head + 2 * n_kv_head;
  GLASS_CHECK(qkv.dim() == 3 && qkv.size(2) > 0 && qkv.size(2) % heads == 0,
              "causal_attention: qkv {} must be [B, T, (n_head + 2 n_kv_head) D] = [B, T, ({} + 2 "
              "* {}) D] with D > 0",
              qkv.describe(), n_head, n_kv_head);
  const int64_t D = qkv.size(2) / heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Tensor qkvc = contiguous(qkv);
  const kernels::Backend& be = kernels::backend(qkvc);
  OpScope op("attention", {qkvc});
  const AttentionKernel resolved = resolve_attention_kernel(kernel, qkvc.device(), qkvc.dtype(), D);
  check_attention_kernel(resolved, qkvc.device(), qkvc.dtype(), D);
  switch (resolved) {
    case AttentionKernel::flash:  // cpu
    case AttentionKernel::flash_simt:
      return fused_attention(qkvc, n_head, n_kv_head, scale, be.flash_attention_forward,
                             be.flash_attention_backward, op);
    case AttentionKernel::flash_mma:
      return fused_attention(qkvc, n_head, n_kv_head, scale, be.flash_attention_forward_mma,
                             be.flash_attention_backward_mma, op);
    case AttentionKernel::cudnn:
      return fused_attention(qkvc, n_head, n_kv_head, scale, be.cudnn_attention_forward,
                             be.cudnn_attention_backward, op);
    default:
      return naive_attention(qkvc, n_head, n_kv_head, scale, op);
  }
}

}  // namespace glass
