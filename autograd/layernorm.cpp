// layer_norm over the last dimension, and residual_layer_norm (a transformer block's residual add
// fused with it), forward and backward side by side.
//
// y = (x - mean) * rstd * weight + bias, with mean and rstd = 1/sqrt(var + eps) per row; the
// kernels save mean and rstd so that backward does not recompute them.
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {

// x [..., C] with weight and bias [C] of x's dtype and device; `op` names the op in the error.
void check_layer_norm_args(const char* op, const Tensor& x, const Tensor& weight,
                           const Tensor& bias) {
  GLASS_CHECK(x.dim() >= 1 && x.size(-1) > 0, "{}: x {} must be [..., C] with C > 0", op,
              x.describe());
  const int64_t C = x.size(-1);
  for (const Tensor* p : {&weight, &bias})
    GLASS_CHECK(p->shape() == Shape{C} && p->dtype() == x.dtype() && p->device() == x.device(),
                "{}: weight {} and bias {} must both be {}[{}] on {} like x {}", op,
                weight.describe(), bias.describe(), dtype_name(x.dtype()), C, x.device().str(),
                x.describe());
}

// The per-row statistics, f32 for bf16 x (accum_dtype).
Tensor row_stats(const Tensor& x) {
  return Tensor::empty({x.numel() / x.size(-1)}, accum_dtype(x.dtype()), x.device());
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                  CallSite site) {
  CallSiteScope at(site);
  check_layer_norm_args("layer_norm", x, weight, bias);
  Tensor xc = contiguous(x), wc = contiguous(weight), bc = contiguous(bias);
  OpScope op("layernorm", {xc, wc, bc});
  Tensor y = empty_like(xc), mean = row_stats(xc), rstd = row_stats(xc);
  kernels::backend(xc).layernorm_forward(xc, wc, bc, y, mean, rstd, eps);
  // dx = rstd (w dy - mean(w dy) - xhat mean(w dy xhat)), dw = sum(dy xhat), db = sum(dy)
  return op.finish(std::move(y), {xc, wc, mean, rstd}, [](Node& n, const Tensor& dy) -> InputGrads {
    const Tensor &x = n.saved[0], &w = n.saved[1], &mean = n.saved[2], &rstd = n.saved[3];
    Tensor dx = empty_like(x), dw = empty_like(w), db = empty_like(w);
    kernels::backend(x).layernorm_backward(contiguous(dy), x, w, mean, rstd, dx, dw, db);
    return {dx, dw, db};
  });
}

ResidualNorm residual_layer_norm(const Tensor& x, const Tensor& delta, const Tensor& weight,
                                 const Tensor& bias, double eps, CallSite site) {
  CallSiteScope at(site);
  check_layer_norm_args("residual_layer_norm", x, weight, bias);
  GLASS_CHECK(
      delta.shape() == x.shape() && delta.dtype() == x.dtype() && delta.device() == x.device(),
      "residual_layer_norm: delta {} must match x {} (shape, dtype, device)", delta.describe(),
      x.describe());
  Tensor xc = contiguous(x), dc = contiguous(delta), wc = contiguous(weight), bc = contiguous(bias);
  OpScope op("residual_layernorm", {xc, dc, wc, bc});
  // One pass: residual = x + delta, and the LayerNorm of it.
  Tensor residual = empty_like(xc), y = empty_like(xc), mean = row_stats(xc), rstd = row_stats(xc);
  kernels::backend(xc).residual_layernorm_forward(xc, dc, wc, bc, residual, y, mean, rstd, eps);
  std::vector<Tensor> outs = op.finish_outputs(
      {residual, y}, {residual, wc, mean, rstd},
      [](Node& n, const Tensor& dresidual) -> InputGrads {
        // Output 0 is residual (its gradient: dresidual), output 1 the normalised y (dy); either
        // may be missing when nothing downstream used it.
        const Tensor &s = n.saved[0], &w = n.saved[1], &mean = n.saved[2], &rstd = n.saved[3];
        const Tensor& dy = n.output_grad(1);
        if (!dy.defined()) return {dresidual, dresidual, Tensor(), Tensor()};  // d(x + delta)
        Tensor ds = empty_like(s), dw = empty_like(w), db = empty_like(w);
        if (dresidual.defined())
          kernels::backend(s).residual_layernorm_backward(contiguous(dy), contiguous(dresidual), s,
                                                          w, mean, rstd, ds, dw, db);
        else
          kernels::backend(s).layernorm_backward(contiguous(dy), s, w, mean, rstd, ds, dw, db);
        // residual = x + delta hands the same gradient to both (backward never sums in place).
        return {ds, ds, dw, db};
      });
  return {outs[0], outs[1]};
}

}  // namespace glass
