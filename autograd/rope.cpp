// rotary_embedding: the rotary position embedding (Llama) on the q and k heads of a fused qkv
// [B, T, (n_head + 2 n_kv_head) D], forward and backward side by side.
//
// Each q and k head's pairs (x[i], x[i + D/2]) are rotated by angle = (start_pos + t) theta^(-2i/D)
// (Hugging Face's rotate-half convention; kernels/backend.h: rope_forward); v passes through. The
// output is a fresh tensor written in one pass (the caller's qkv is never rotated in place).
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

Tensor rotary_embedding(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, double theta,
                        int64_t start_pos, CallSite site) {
  CallSiteScope at(site);
  const int64_t heads = n_head + 2 * n_kv_head;
  const int64_t width = qkv.dim() == 3 ? qkv.size(2) : 0;
  GLASS_CHECK(qkv.dim() == 3 && n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0 &&
                  width > 0 && width % heads == 0 && width / heads % 2 == 0,
              "rotary_embedding: qkv {} must be [B, T, (n_head + 2 n_kv_head) D] with D even and "
              "n_kv_head dividing n_head; n_head {}, n_kv_head {}: last dimension {} over {} heads",
              qkv.describe(), n_head, n_kv_head, width, heads);
  GLASS_CHECK(theta > 0 && start_pos >= 0,
              "rotary_embedding: theta {} must be > 0 and start_pos {} >= 0 (qkv {})", theta,
              start_pos, qkv.describe());
  Tensor in = contiguous(qkv);
  OpScope op("rope", {in});
  Tensor out = empty_like(in);
  kernels::backend(in).rope_forward(in, out, n_head, n_kv_head, theta, start_pos);
  // dx = dy rotated by -angle (the rotation's transpose); v's gradient passes through
  return op.finish(std::move(out), {},
                   [n_head, n_kv_head, theta, start_pos](Node&, const Tensor& dout) -> InputGrads {
                     Tensor dc = contiguous(dout), dqkv = empty_like(dc);
                     kernels::backend(dc).rope_backward(dc, dqkv, n_head, n_kv_head, theta,
                                                        start_pos);
                     return {dqkv};
                   });
}

}  // namespace glass
