// layer_norm over the last dimension, forward and backward side by side.
//
// y = (x - mean) * rstd * weight + bias, with mean and rstd = 1/sqrt(var + eps) per row; the
// kernels save mean and rstd so that backward does not recompute them.
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(x.dim() >= 1 && x.size(-1) > 0, "layer_norm: x {} must be [..., C] with C > 0",
              x.describe());
  const int64_t C = x.size(-1);
  for (const Tensor* p : {&weight, &bias})
    GLASS_CHECK(p->shape() == Shape{C} && p->dtype() == x.dtype() && p->device() == x.device(),
                "layer_norm: weight {} and bias {} must both be {}[{}] on {} like x {}",
                weight.describe(), bias.describe(), dtype_name(x.dtype()), C, x.device().str(),
                x.describe());
  Tensor xc = contiguous(x), wc = contiguous(weight), bc = contiguous(bias);
  OpScope op("layernorm", {xc, wc, bc});
  const int64_t rows = xc.numel() / C;
  Tensor y = empty_like(xc);
  // The statistics in f32 for bf16 x (accum_dtype).
  Tensor mean = Tensor::empty({rows}, accum_dtype(xc.dtype()), xc.device());
  Tensor rstd = Tensor::empty({rows}, accum_dtype(xc.dtype()), xc.device());
  kernels::backend(xc).layernorm_forward(xc, wc, bc, y, mean, rstd, eps);
  // dx = rstd (w dy - mean(w dy) - xhat mean(w dy xhat)), dw = sum(dy xhat), db = sum(dy)
  return op.finish(y, {xc, wc, mean, rstd}, [](Node& n, const Tensor& dy) -> std::vector<Tensor> {
    const Tensor &x = n.saved[0], &w = n.saved[1], &mean = n.saved[2], &rstd = n.saved[3];
    Tensor dx = empty_like(x), dw = empty_like(w), db = empty_like(w);
    kernels::backend(x).layernorm_backward(contiguous(dy), x, w, mean, rstd, dx, dw, db);
    return {dx, dw, db};
  });
}

}  // namespace glass
