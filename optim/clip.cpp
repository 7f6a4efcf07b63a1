#include "optim/clip.h"

#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass {

Tensor clip_grad_norm_on_device(const std::vector<Tensor>& params, double max_norm) {
  GLASS_CHECK(max_norm > 0, "clip_grad_norm: max_norm {} must be positive", max_norm);
  NoGradGuard no_grad;
  LaunchScope scope("clip_grad_norm", -1, Phase::optimizer);
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return {};

  // 1. The sum of squares over every gradient: one multi-tensor reduction into device memory.
  std::vector<Tensor> dense;
  for (const Tensor& g : grads) dense.push_back(contiguous(g));
  Tensor total = Tensor::empty({1}, DType::f64, grads[0].device());
  kernels::backend(total).sum_squares(dense, total);
  // An infinite bound scales nothing whatever the sum (clip_factor is 1): the caller wants only
  // the norm (train_gpt's --grad-clip 0), and no clip_scale is launched to do nothing.
  if (std::isinf(max_norm)) return total;

  // 2. Scale in place so that the global norm becomes max_norm, the factor formed on the device
  //    from the sum (max_norm / (norm + 1e-6) when norm > max_norm).
  for (const Tensor& g : grads) kernels::backend(g).clip_scale(g, total, max_norm);
  return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  const Tensor total = clip_grad_norm_on_device(params, max_norm);
  return total.defined() ? std::sqrt(item(total)) : 0.0;
}

}  // namespace glass
