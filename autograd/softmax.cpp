// softmax, log_softmax and cross_entropy over the last dimension, forward and backward side by
// side.
//
// Inputs are made contiguous first (a visible copy only when they are not, recorded as its own
// node), and the kernels see them as [rows, last dimension].
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {

using RowKernel = void (*)(const Tensor& in, const Tensor& out);
using RowBackwardKernel = void (*)(const Tensor& y, const Tensor& dy, const Tensor& dx);

// softmax and log_softmax differ only in their kernels (entries of the device's Backend table);
// both save their output y, from which the backward kernel finds dx.
Tensor rowwise_op(const char* name, const Tensor& x, RowKernel kernels::Backend::*forward,
                  RowBackwardKernel kernels::Backend::*backward) {
  Tensor xc = contiguous(x);
  OpScope op(name, {xc});
  Tensor y = empty_like(xc);
  (kernels::backend(xc).*forward)(xc, y);
  // softmax: dx = y (dy - sum(dy y)); log_softmax: dx = dy - exp(y) sum(dy)
  return op.finish(y, {y}, [backward](Node& n, const Tensor& dy) -> InputGrads {
    const Tensor& y = n.saved[0];
    Tensor dx = empty_like(y);
    (kernels::backend(y).*backward)(y, contiguous(dy), dx);
    return {dx};
  });
}

}  // namespace

Tensor softmax(const Tensor& x, CallSite site) {
  CallSiteScope at(site);
  return rowwise_op("softmax", x, &kernels::Backend::softmax_forward,
                    &kernels::Backend::softmax_backward);
}

Tensor log_softmax(const Tensor& x, CallSite site) {
  CallSiteScope at(site);
  return rowwise_op("log_softmax", x, &kernels::Backend::log_softmax_forward,
                    &kernels::Backend::log_softmax_backward);
}

// loss = sum over rows of (logsumexp(logits[r]) - logits[r, t_r]) / valid, where valid counts the
// rows whose target is not ignore_index. With every target ignored the loss is 0/0 = NaN, as in
// PyTorch, and the gradient is 0. dlogits[r] = (softmax(logits[r]) - onehot(t_r)) * dloss / valid.
// The losses, logsumexps and the loss are of accum_dtype(logits): f32 for bf16 logits.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(targets.dtype() == DType::i32, "cross_entropy: targets {} must be i32 (class ids)",
              targets.describe());
  GLASS_CHECK(logits.dim() >= 1 && logits.size(-1) > 0,
              "cross_entropy: logits {} must be [..., V] with V > 0", logits.describe());
  GLASS_CHECK(logits.device() == targets.device(),
              "cross_entropy: logits {} and targets {} are on different devices", logits.describe(),
              targets.describe());
  const int64_t rows = logits.numel() / logits.size(-1);
  GLASS_CHECK(targets.numel() == rows,
              "cross_entropy: logits {} have {} rows of V = {} but targets {} hold {} ids",
              logits.describe(), rows, logits.size(-1), targets.describe(), targets.numel());
  Tensor lg = contiguous(logits);
  Tensor tg = contiguous(targets);
  OpScope op("cross_entropy", {lg});
  const auto& k = kernels::backend(lg);
  const DType acc = accum_dtype(lg.dtype());
  auto scalar = [&] { return Tensor::empty({}, acc, lg.device()); };
  // 1. per-row losses and logsumexps, and the number of rows that count
  Tensor losses = Tensor::empty({rows}, acc, lg.device());
  Tensor lse = Tensor::empty({rows}, acc, lg.device());
  Tensor valid = scalar();
  k.cross_entropy_forward(lg, tg, losses, lse, valid, ignore_index);
  // 2. their mean over the rows that count
  Tensor total = scalar();
  k.sum_dim(losses, total, 0);
  Tensor loss = scalar();
  k.binary(kernels::BinaryOp::div, total, valid, loss);
  // dlogits = (softmax(logits) - onehot(t)) dloss / valid
  return op.finish(std::move(loss), {lg, tg, lse, valid},
                   [ignore_index](Node& n, const Tensor& dloss) -> InputGrads {
                     const Tensor &lg = n.saved[0], &tg = n.saved[1], &lse = n.saved[2],
                                  &valid = n.saved[3];
                     const auto& k = kernels::backend(lg);
                     // every counted row enters the mean with weight 1/valid: dlosses = dloss /
                     // valid, broadcast over the rows (stride 0)
                     const int64_t rows = lse.numel();
                     Tensor dlosses = Tensor::empty({rows}, lse.dtype(), lg.device());
                     k.binary(kernels::BinaryOp::div, dloss.as_strided({rows}, {0}, dloss.offset()),
                              valid.as_strided({rows}, {0}, valid.offset()), dlosses);
                     Tensor dlogits = empty_like(lg);
                     k.cross_entropy_backward(lg, tg, lse, dlosses, dlogits, ignore_index);
                     return {dlogits};
                   });
}

}  // namespace glass
