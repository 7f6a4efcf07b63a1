// rms_norm over the last dimension (Llama), and residual_rms_norm (a block's residual add fused
// with it), forward and backward side by side.
//
// y = x * rstd * weight with rstd = 1/sqrt(mean(x^2) + eps) per row (f32 also for bf16 x); the
// kernels save rstd so that backward does not recompute it.
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {

// x [..., C] with weight [C] of x's dtype and device; `op` names the op in the error.
void check_rms_norm_args(const char* op, const Tensor& x, const Tensor& weight) {
  GLASS_CHECK(x.dim() >= 1 && x.size(-1) > 0, "{}: x {} must be [..., C] with C > 0", op,
              x.describe());
  const int64_t C = x.size(-1);
  GLASS_CHECK(
      weight.shape() == Shape{C} && weight.dtype() == x.dtype() && weight.device() == x.device(),
      "{}: weight {} must be {}[{}] on {} like x {}", op, weight.describe(), dtype_name(x.dtype()),
      C, x.device().str(), x.describe());
}

// rstd per row, f32 for bf16 x (accum_dtype).
Tensor rstd_per_row(const Tensor& x) {
  return Tensor::empty({x.numel() / x.size(-1)}, accum_dtype(x.dtype()), x.device());
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps, CallSite site) {
  CallSiteScope at(site);
  check_rms_norm_args("rms_norm", x, weight);
  Tensor xc = contiguous(x), wc = contiguous(weight);
  OpScope op("rmsnorm", {xc, wc});
  Tensor y = empty_like(xc), rstd = rstd_per_row(xc);
  kernels::backend(xc).rmsnorm_forward(xc, wc, y, rstd, eps);
  // dx = rstd (w dy - xhat mean(w dy xhat)), dw = sum(dy xhat), xhat = x rstd
  return op.finish(std::move(y), {xc, wc, rstd}, [](Node& n, const Tensor& dy) -> InputGrads {
    const Tensor &x = n.saved[0], &w = n.saved[1], &rstd = n.saved[2];
    Tensor dx = empty_like(x), dw = empty_like(w);
    kernels::backend(x).rmsnorm_backward(contiguous(dy), x, w, rstd, dx, dw);
    return {dx, dw};
  });
}

ResidualNorm residual_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight,
                               double eps, CallSite site) {
  CallSiteScope at(site);
  check_rms_norm_args("residual_rms_norm", x, weight);
  GLASS_CHECK(
      delta.shape() == x.shape() && delta.dtype() == x.dtype() && delta.device() == x.device(),
      "residual_rms_norm: delta {} must match x {} (shape, dtype, device)", delta.describe(),
      x.describe());
  Tensor xc = contiguous(x), dc = contiguous(delta), wc = contiguous(weight);
  OpScope op("residual_rmsnorm", {xc, dc, wc});
  // One pass: residual = x + delta, and the RMSNorm of it.
  Tensor residual = empty_like(xc), y = empty_like(xc), rstd = rstd_per_row(xc);
  kernels::backend(xc).residual_rmsnorm_forward(xc, dc, wc, residual, y, rstd, eps);
  // d(x) = d(delta) = dresidual + rstd (w dy - xhat mean(w dy xhat)), dw = sum(dy xhat)
  std::vector<Tensor> outs = op.finish_outputs(
      {residual, y}, {residual, wc, rstd}, [](Node& n, const Tensor& dresidual) -> InputGrads {
        // Output 0 is residual (its gradient: dresidual), output 1 the normalised y (dy); either
        // may be missing when nothing downstream used it.
        const Tensor &s = n.saved[0], &w = n.saved[1], &rstd = n.saved[2];
        const Tensor& dy = n.output_grad(1);
        if (!dy.defined()) return {dresidual, dresidual, Tensor()};  // d(x + delta)
        Tensor ds = empty_like(s), dw = empty_like(w);
        if (dresidual.defined())
          kernels::backend(s).residual_rmsnorm_backward(contiguous(dy), contiguous(dresidual), s, w,
                                                        rstd, ds, dw);
        else
          kernels::backend(s).rmsnorm_backward(contiguous(dy), s, w, rstd, ds, dw);
        // residual = x + delta hands the same gradient to both (backward never sums in place).
        return {ds, ds, dw};
      });
  return {outs[0], outs[1]};
}

}  // namespace glass
