// Cost of the embedding gather (embedding_forward), shared by kernels/cpu/embedding.cpp and
// kernels/cuda/embedding.cu (kernels/costs/launch_cost.h). The backward is each device's own: cpu
// sorts the positions by id on the host and sums each table row in one launch; emu/cuda rank the
// ids, add the rows and combine them in three launches (kernels/cuda/embedding.cu), each counted
// there.
#pragma once

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"

namespace glass::kernels {

// No FLOPs; the ids read, and per id one table row read and one out row written.
inline LaunchCost embedding_forward_cost(const Tensor& ids, const Tensor& out) {
  return {0, static_cast<double>(ids.nbytes()) + 2.0 * static_cast<double>(out.nbytes())};
}

}  // namespace glass::kernels
