// Shared helpers for the `cpu` kernels: type dispatch, launch info, threading and strided loops.
#pragma once

#include <omp.h>

#include <array>
#include <cstdint>

#include "engine/launch.h"
#include "engine/tensor.h"
#include "kernels/backend.h"

namespace glass::kernels::cpu {

// Calls fn.template operator()<T>() with T = float or double, as the dtype says.
template <class Fn>
void visit_float(DType t, const char* kernel, Fn&& fn) {
  switch (t) {
    case DType::f32:
      fn.template operator()<float>();
      return;
    case DType::f64:
      fn.template operator()<double>();
      return;
    default:
      fail("{}: dtype {} is not supported on cpu (f32, f64)", kernel, dtype_name(t));
  }
}

// LaunchInfo for a cpu kernel: grid.x = independent work items, block.x = threads used.
inline LaunchInfo cpu_launch_info(const char* kernel, int64_t work_items, double flops,
                                  double bytes) {
  LaunchInfo info;
  info.kernel = kernel;
  info.device = kCPU;
  info.grid = {static_cast<unsigned>(std::min<int64_t>(work_items, UINT32_MAX)), 1, 1};
  info.block = {static_cast<unsigned>(omp_get_max_threads()), 1, 1};
  info.flops = flops;
  info.bytes = bytes;
  return info;
}

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelGrain = 1 << 15;

// A loop over the elements of a shape in row-major order, for N operands with their own strides.
// Dimensions are split into an inner run (the last dimension) and outer rows; fn(row, offsets,
// inner_strides, inner) handles one row, with offsets[i] the element offset of operand i at the
// row's start. Rows run in parallel when there is enough work.
template <size_t N>
struct StridedLoop {
  Shape shape;
  std::array<Shape, N> strides;

  template <class Fn>
  void run(Fn&& fn) const {
    const int nd = static_cast<int>(shape.size());
    const int64_t inner = nd ? shape[nd - 1] : 1;
    std::array<int64_t, N> inner_stride{};
    for (size_t i = 0; i < N; ++i) inner_stride[i] = nd ? strides[i][nd - 1] : 0;
    int64_t rows = 1;
    for (int d = 0; d + 1 < nd; ++d) rows *= shape[d];
    if (rows == 0 || inner == 0) return;
#pragma omp parallel for schedule(static) if (rows * inner >= kParallelGrain && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
      std::array<int64_t, N> off{};
      int64_t rem = r;
      for (int d = nd - 2; d >= 0; --d) {
        const int64_t idx = rem % shape[d];
        rem /= shape[d];
        for (size_t i = 0; i < N; ++i) off[i] += idx * strides[i][d];
      }
      fn(off, inner_stride, inner);
    }
  }
};

}  // namespace glass::kernels::cpu
