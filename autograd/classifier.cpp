// fused_classifier: the mean cross-entropy of a language model's logits, with the gradient of the
// logits computed in forward (kernels/cuda/classifier.cu says why), forward and backward side by
// side.
//
// Forward runs the fused kernel, which writes d(mean loss)/d(logits) over the logits when a
// gradient will be needed: the logits tensor is consumed (read it before calling). Backward only
// scales that gradient by the incoming one, in place: one multiply per element, no second
// softmax. For bf16 logits the losses, their count and the loss are f32 (accum_dtype) and the
// gradient left in the logits is bf16.
//
// When the loss is the root of backward() with no gradient passed (the trainer's
// `backward(loss)`), the incoming gradient is backward()'s own seed, 1, known on the host
// (autograd/backward.h: is_unit_seed): the gradient forward left is then the answer as it is, and
// backward launches nothing, as llm.c's classifier, which bakes d(loss) = 1/(B T) into its one
// pass. Exact: the multiply it skips is by 1 (bf16 1 for bf16 logits), and g * 1 == g for every
// float but a NaN (which stays a NaN), so the gradient has the bits the multiply gave it. Any other
// incoming gradient (`(loss * 3)`, a loss divided over micro-steps, a caller's seed) is a value on
// the device and is multiplied in.
#include "autograd/backward.h"
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

Tensor fused_classifier(const Tensor& logits, const Tensor& targets, int64_t vocab,
                        int64_t ignore_index, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(logits.dim() == 2 && targets.dim() == 1,
              "fused_classifier: logits {} must be [rows, V] and targets {} [rows]",
              logits.describe(), targets.describe());
  GLASS_CHECK(logits.device() == targets.device(),
              "fused_classifier: logits {} and targets {} are on different devices",
              logits.describe(), targets.describe());
  // A leaf (a parameter, a user's tensor) is not overwritten: the kernel works on a copy of it.
  const bool copy = logits.is_leaf() && logits.requires_grad();
  Tensor lg = copy ? empty_like(logits) : contiguous(logits);
  if (copy) kernels::backend(logits).copy(logits, lg);
  Tensor tg = contiguous(targets);
  OpScope op("fused_classifier", {copy ? logits : lg});
  const auto& k = kernels::backend(lg);
  const DType acc = accum_dtype(lg.dtype());
  auto scalar = [&] { return Tensor::empty({}, acc, lg.device()); };
  // 1. per-row losses, the number of rows that count, and (when needed) dlogits over lg
  Tensor losses = Tensor::empty({lg.size(0)}, acc, lg.device());
  Tensor valid = scalar();
  k.fused_classifier(lg, tg, losses, valid, vocab, ignore_index, op.needs_grad());
  // 2. their mean over the rows that count
  Tensor total = scalar();
  k.sum_dim(losses, total, 0);
  Tensor loss = scalar();
  k.binary(kernels::BinaryOp::div, total, valid, loss);
  // dlogits = (softmax - onehot) / valid, made in forward; backward scales it by dloss
  return op.finish(std::move(loss), {lg}, [](Node& n, const Tensor& dloss) -> InputGrads {
    const Tensor& dlogits = n.saved[0];
    if (is_unit_seed(dloss)) return {dlogits};  // dloss = 1: dlogits * 1 == dlogits, bit for bit
    // dlogits = (the gradient forward left in the logits) * dloss, dloss broadcast (stride 0);
    // an f32 dloss (bf16 logits) is first cast to the logits' dtype, one element
    const kernels::Backend& k = kernels::backend(dlogits);
    Tensor scale = dloss;
    if (dloss.dtype() != dlogits.dtype()) {
      scale = Tensor::empty({}, dlogits.dtype(), dlogits.device());
      k.cast(dloss, scale);
    }
    k.binary(kernels::BinaryOp::mul, dlogits,
             scale.as_strided(dlogits.shape(), {0, 0}, scale.offset()), dlogits);
    return {dlogits};
  });
}

}  // namespace glass
