// Costs of SwiGLU's activation, shared by kernels/cpu/swiglu.cpp and kernels/cuda/swiglu.cu
// (kernels/costs/launch_cost.h): gate_up [N, 2F], out and dout [N, F].
#pragma once

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"

namespace glass::kernels {

// Forward, per output element (an exp counted as one operation): sigmoid 3, silu 1, * up 1;
// gate_up read, out written.
inline LaunchCost swiglu_forward_cost(const Tensor& gate_up, const Tensor& out) {
  return {5.0 * static_cast<double>(out.numel()),
          static_cast<double>(gate_up.nbytes() + out.nbytes())};
}

// Backward, per output element: sigmoid 3, silu' 4, dgate 2, dup 2; gate_up and dout read,
// dgate_up (gate_up's size) written.
inline LaunchCost swiglu_backward_cost(const Tensor& gate_up, const Tensor& dout) {
  return {11.0 * static_cast<double>(dout.numel()),
          static_cast<double>(2 * gate_up.nbytes() + dout.nbytes())};
}

}  // namespace glass::kernels
