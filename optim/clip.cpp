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

  // 1. Each gradient's sum of squares into its own slot of one buffer, read back with one copy.
  Tensor partials =
      Tensor::empty({static_cast<int64_t>(grads.size())}, DType::f32, grads[0].device());
  for (size_t i = 0; i < grads.size(); ++i)
    kernels::backend(grads[i]).sum_squares(contiguous(grads[i]),
                                           partials.as_strided({1}, {1}, static_cast<int64_t>(i)));
  double total = 0;
  for (float s : to_vector<float>(partials)) total += s;
  const double norm = std::sqrt(total);

  // 2. Scale in place so that the global norm becomes max_norm.
  if (norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const Tensor& g : grads) kernels::backend(g).affine(g, g, scale, 0.0);
  }
  return norm;
}

}  // namespace glass
