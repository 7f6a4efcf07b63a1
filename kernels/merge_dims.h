// merge_dims: the loop nest N operands walk over one shape, made as short as it can be. Shared by
// the cpu strided loops (kernels/cpu/cpu.h: StridedLoop) and the CUDA kernels' StridedIndex
// (kernels/cuda/common.h), so copy and the binary ops see the same dimensions on every device.
#pragma once

#include <array>
#include <cstddef>

#include "engine/tensor.h"

namespace glass::kernels {

// A shape and each operand's strides over it, in elements.
template <size_t N>
struct MergedDims {
  Shape shape;
  std::array<Shape, N> strides;
};

// `shape` walked by N operands with `strides`, with size-1 dimensions dropped and neighbouring
// dimensions merged wherever every operand steps through them as one (stride[d-1] == stride[d] *
// size[d]): operands contiguous alike become a single run of stride 1, and a transposed pair keeps
// its contiguous inner run. A 0-d or all-ones shape becomes no dimension at all (one element).
template <size_t N>
MergedDims<N> merge_dims(const Shape& shape, const std::array<Shape, N>& strides) {
  MergedDims<N> m;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !m.shape.empty();
    for (size_t i = 0; i < N && merge; ++i) merge = m.strides[i].back() == strides[i][d] * shape[d];
    if (merge) {
      m.shape.back() *= shape[d];
      for (size_t i = 0; i < N; ++i) m.strides[i].back() = strides[i][d];
    } else {
      m.shape.push_back(shape[d]);
      for (size_t i = 0; i < N; ++i) m.strides[i].push_back(strides[i][d]);
    }
  }
  return m;
}

}  // namespace glass::kernels
