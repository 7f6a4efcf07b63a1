// Costs of the memory kernels (fill, copy, cast, fill_normal, fill_uniform): no FLOPs (the random
// fills' Philox arithmetic is not counted), each element written once and, for copy and cast, read
// once. Shared by kernels/cpu/memory.cpp and kernels/cuda/memory.cu (kernels/costs/launch_cost.h).
#pragma once

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"

namespace glass::kernels {

// fill, fill_normal, fill_uniform: dst written.
inline LaunchCost fill_cost(const Tensor& dst) { return {0, static_cast<double>(dst.nbytes())}; }

// copy and cast: src read, dst written (copy: one dtype, so 2 src.nbytes()).
inline LaunchCost copy_cost(const Tensor& src, const Tensor& dst) {
  return {0, static_cast<double>(src.nbytes() + dst.nbytes())};
}

}  // namespace glass::kernels
