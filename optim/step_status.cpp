#include "optim/step_status.h"

#include <vector>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass {

Tensor step_status(const Tensor& loss, const Tensor& sum_sq) {
  NoGradGuard no_grad;
  LaunchScope scope("step_status", -1, Phase::optimizer);
  Tensor status = Tensor::empty({3}, DType::f64, loss.device());
  kernels::backend(status).step_status(loss, sum_sq, status);
  return status;
}

Tensor finite_gate(const Tensor& status) { return slice(status, 0, 2, 3); }

StepStatus read_step_status(const Tensor& status) {
  const std::vector<double> v = to_vector<double>(status);
  return {v[0], v[1], v[2] != 0.0};
}

}  // namespace glass
