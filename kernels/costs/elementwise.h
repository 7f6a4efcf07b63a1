// Costs of the elementwise kernels, shared by kernels/cpu/elementwise.cpp and
// kernels/cuda/elementwise.cu (kernels/costs/launch_cost.h). Bytes: each input element read once
// and each output element written once; a broadcast operand (stride 0) is read once per distinct
// element.
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"

namespace glass::kernels {

// GELU's FLOPs per element (tanh form as x sigmoid(2u)): forward u (5), -2u, exp, 1 + e, 1 / (.),
// x (.); backward q (9), du/dx (4), the product (7).
constexpr double kGeluForwardFlops = 10;
constexpr double kGeluBackwardFlops = 20;

// Elements a (possibly broadcast) operand really holds: dimensions of stride 0 are read once.
inline int64_t distinct_elements(const Tensor& t) {
  const Shape &shape = t.shape(), &strides = t.strides();
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    n *= strides[d] == 0 ? std::min<int64_t>(shape[d], 1) : shape[d];
  return n;
}

// out = a op b: one FLOP per element.
inline LaunchCost binary_cost(const Tensor& a, const Tensor& b, const Tensor& out) {
  return {static_cast<double>(out.numel()),
          static_cast<double>(distinct_elements(a) + distinct_elements(b) + out.numel()) *
              static_cast<double>(dtype_size(out.dtype()))};
}

// y = f(x) with `flops_per_element` FLOPs each (affine 2, pow_scalar 1, gelu_forward, dropout 1).
inline LaunchCost map_cost(const Tensor& x, double flops_per_element) {
  return {flops_per_element * static_cast<double>(x.numel()),
          2.0 * static_cast<double>(x.nbytes())};
}

// gelu_backward: x and dy read, dx written.
inline LaunchCost gelu_backward_cost(const Tensor& x) {
  return {kGeluBackwardFlops * static_cast<double>(x.numel()),
          3.0 * static_cast<double>(x.nbytes())};
}

}  // namespace glass::kernels
