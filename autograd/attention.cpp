// causal_attention: softmax(q k^T / sqrt(D), causal mask) v on [B, H, T, D], forward and backward
// side by side. The probabilities [B, H, T, T] are saved for backward (no recomputation).
#include <cmath>

#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(q.dim() == 4 && q.size(3) > 0, "causal_attention: q {} must be [B, H, T, D], D > 0",
              q.describe());
  for (const Tensor* t : {&k, &v})
    GLASS_CHECK(t->shape() == q.shape() && t->dtype() == q.dtype() && t->device() == q.device(),
                "causal_attention: q {}, k {} and v {} must share shape, dtype and device",
                q.describe(), k.describe(), v.describe());
  Tensor qc = contiguous(q), kc = contiguous(k), vc = contiguous(v);
  OpScope op("attention", {qc, kc, vc});
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const int64_t T = q.size(2);
  Tensor out = empty_like(qc);
  Tensor probs = Tensor::empty({q.size(0), q.size(1), T, T}, q.dtype(), q.device());
  kernels::backend(qc).attention_forward(qc, kc, vc, out, probs, scale);
  return op.finish(
      out, {qc, kc, vc, probs}, [scale](Node& n, const Tensor& dout) -> std::vector<Tensor> {
        const Tensor &q = n.saved[0], &k = n.saved[1], &v = n.saved[2], &probs = n.saved[3];
        Tensor dq = empty_like(q), dk = empty_like(k), dv = empty_like(v);
        kernels::backend(q).attention_backward(q, k, v, probs, contiguous(dout), dq, dk, dv, scale);
        return {dq, dk, dv};
      });
}

}  // namespace glass
