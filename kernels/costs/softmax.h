// Costs of the softmax family (softmax, log_softmax, cross_entropy), shared by
// kernels/cpu/softmax.cpp and kernels/cuda/softmax.cu (kernels/costs/launch_cost.h). Rows of the
// last dimension; bytes: each operand once.
#pragma once

#include <initializer_list>

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"
#include "kernels/shape_checks.h"

namespace glass::kernels {

// FLOPs per element: forward max, x - max, exp, sum, scale (log_softmax: the log instead of the
// scale); backward the row's dot (2), dy - dot, the product.
constexpr double kSoftmaxForwardFlops = 5;
constexpr double kSoftmaxBackwardFlops = 4;

// A row-wise softmax-family launch over `elements` elements touching `operands` once each.
inline LaunchCost rowwise_cost(double flops_per_element, double elements,
                               std::initializer_list<const Tensor*> operands) {
  return {flops_per_element * elements, bytes_of(operands)};
}

// cross_entropy_forward's row pass, per logit: max, x - max, exp, sum (4); logits, targets,
// losses, lse. The count of valid rows (valid, 4 bytes) is written by the same launch on cpu and by
// the target check's launch on emu/cuda (kernels/cuda/classifier.cu: check_targets), whose cost
// has it.
inline LaunchCost cross_entropy_forward_cost(const Tensor& logits, const Tensor& targets,
                                             const Tensor& losses, const Tensor& lse) {
  return {4.0 * static_cast<double>(logits.numel()), bytes_of({&logits, &targets, &losses, &lse})};
}

// cross_entropy_backward, per logit: exp(x - lse), minus the one-hot, times dloss (3).
inline LaunchCost cross_entropy_backward_cost(const Tensor& logits, const Tensor& targets,
                                              const Tensor& lse, const Tensor& dlosses,
                                              const Tensor& dlogits) {
  return {3.0 * static_cast<double>(logits.numel()),
          bytes_of({&logits, &targets, &lse, &dlosses, &dlogits})};
}

}  // namespace glass::kernels
