#include "optim/clip.h"

#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  GLASS_CHECK(max_norm > 0, "clip_grad_norm: max_norm {} must be positive", max_norm);
  NoGradGuard no_grad;
  LaunchScope scope("clip_grad_norm", -1, Phase::optimizer);
  std::vector<Tensor> grads;
  for (const Tensor& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return 0;

  // 1. The sum of squares over every gradient: one multi-tensor reduction, one value read back.
  std::vector<Tensor> dense;
  for (const Tensor& g : grads) dense.push_back(contiguous(g));
  Tensor total = Tensor::empty({1}, DType::f64, grads[0].device());
  kernels::backend(total).sum_squares(dense, total);
  const double norm = std::sqrt(to_vector<double>(total)[0]);

  // 2. Scale in place so that the global norm becomes max_norm; a non-finite norm scales nothing.
  if (std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const Tensor& g : grads) kernels::backend(g).affine(g, g, scale, 0.0);
  }
  return norm;
}

}  // namespace glass
