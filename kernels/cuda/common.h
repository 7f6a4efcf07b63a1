// Helpers shared by the host launchers and kernels of kernels/cuda: dtype dispatch, LaunchInfo,
// strided indexing for kernels whose operands have arbitrary strides (copy, binary ops), and the
// block-wide reduction of the row kernels (softmax, layernorm, attention, sum_squares).
//
// Strided operands reach a kernel as one small struct passed by value (kernel parameters live in
// constant memory on a GPU): the shape and each operand's strides, in elements, after size-1
// dimensions were dropped and neighbouring dimensions merged wherever every operand walks them
// as one. A contiguous tensor so becomes a single dimension of stride 1.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "engine/device_flags.h"
#include "engine/launch.h"
#include "engine/tensor.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/dtype_dispatch.h"
#include "kernels/merge_dims.h"
#include "kernels/shape_checks.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

constexpr int kMaxDims = 8;  // rank limit of strided kernels (after merging dimensions)

// Threads for a block that strides over `width` items of a row: whole warps (a warp is what an SM
// schedules, so a partial one would idle its lanes anyway), enough to cover the width, at most
// max_threads (a multiple of 32); the threads of a wider row stride over the rest.
inline unsigned whole_warps(int64_t width, int64_t max_threads) {
  return 32 * ceil_div(std::clamp<int64_t>(width, 1, max_threads), 32);
}

// --- element types: what a kernel reads and writes (float, double, or bf16) and what its math
// runs in (compute_t, kernels/dtype_dispatch.h: float for bf16, so every sum, max and exp is f32
// or better). A kernel
// templated on the stored type T loads with to_compute and stores with from_compute<T>; for float
// and double both are the identity, for bf16 a load is exact and a store rounds to nearest even
// (as glass::bf16::from_float and PyTorch do; a NaN stays a quiet NaN).

__device__ inline float to_compute(float v) { return v; }
__device__ inline double to_compute(double v) { return v; }
__device__ inline float to_compute(bf16 v) {
  return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
}

template <class T>
__device__ inline T from_compute(compute_t<T> v) {
  return v;
}
template <>
__device__ inline bf16 from_compute<bf16>(float v) {
  uint32_t u = __float_as_uint(v);
  bf16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a (quiet) NaN
    b.bits = static_cast<uint16_t>((u >> 16) | 0x40u);
    return b;
  }
  u += 0x7fffu + ((u >> 16) & 1u);  // round half to even
  b.bits = static_cast<uint16_t>(u >> 16);
  return b;
}

// The dispatch of the kernels that have a bf16 form (bf16 mixed precision, README): T = float,
// double or bf16, as t's dtype says (kernels/dtype_dispatch.h).
template <class Fn>
void visit_element(const Tensor& t, const char* kernel, Fn&& fn) {
  visit_dtype<float, bf16, double>(t, kernel, std::forward<Fn>(fn));
}

// The same for the kernels whose math is f32 only (softmax, layernorm, attention, embedding, gemm):
// T = float or bf16; f64 (for gradcheck on cpu) is refused.
template <class Fn>
void visit_f32_bf16(const Tensor& t, const char* kernel, Fn&& fn) {
  visit_dtype<float, bf16>(t, kernel, std::forward<Fn>(fn));
}

// For kernels that exist in f32 only (the attention ladder's rungs, kernels/cuda/ladder): returns
// t, or throws naming the kernel, the tensor and its dtype.
inline const Tensor& require_f32(const char* kernel, const Tensor& t) {
  GLASS_CHECK(t.dtype() == DType::f32, "{}: {} is {}; the {} kernel is f32 only so far", kernel,
              t.describe(), dtype_name(t.dtype()), t.device().str());
  return t;
}

// LaunchInfo of a kernel running on `on`'s device.
inline LaunchInfo kernel_launch_info(const char* kernel, const Tensor& on, dim3 grid, dim3 block,
                                     size_t shared_bytes, double flops, double bytes) {
  LaunchInfo info;
  info.kernel = kernel;
  info.device = on.device();
  info.grid = {grid.x, grid.y, grid.z};
  info.block = {block.x, block.y, block.z};
  info.shared_bytes = shared_bytes;
  info.flops = flops;
  info.bytes = bytes;
  return info;
}

// --- device error flags (engine/device_flags.h): bad input a kernel meets is raised in a flag that
// the next host read checks, instead of a read-back per launch.

// A fresh flag on `on`'s device, checked at the next host read: a raised flag throws
// message(first bad position).
inline Tensor deferred_flag(const Tensor& on, FlagMessage message) {
  Tensor flag = new_device_flag(on.device());
  defer_flag_check(flag, std::move(message));
  return flag;
}

// Raises `flag` for bad input at `position`; atomicMax keeps the smallest position, so the flag
// names the first bad one whatever order the threads ran in.
__device__ inline void raise_flag(int* flag, int64_t position) {
  atomicMax(flag, kFlagBase - static_cast<int>(position));
}

// The i32 at `position` of a contiguous tensor, read to the host: for error messages only.
inline int32_t read_i32_at(const Tensor& t, int64_t position) {
  int32_t value = 0;
  t.as_strided({1}, {1}, t.offset() + position).copy_to_host(&value);
  return value;
}

// --- block_reduce: op over one value per thread of a 1-D block, by the whole block.

constexpr unsigned kFullMask = 0xffffffffu;  // all 32 lanes of a warp take part in a shuffle

struct Sum {
  template <class T>
  __host__ __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  template <class T>
  __host__ __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct Min {
  template <class T>
  __host__ __device__ T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};

// op over `value` of every thread of the block; every thread gets the result. blockDim.x must be
// a multiple of 32 (at most 1024) and every thread must call it (it holds two barriers). The
// order of the operations is fixed (butterfly inside warps, then warps in order), so the result is
// the same bits on every run. `static`: each kernel file gets its own copy, compiled with that
// file's flags, so the -O0 softmax.cu of a debug build (docs/debugging.md) steps through its own
// unoptimised reduction rather than whichever file's copy the linker kept.
template <class T, class Op>
static __device__ T block_reduce(T value, Op op) {
  __shared__ T warp_results[32];
  // 1. inside each warp: butterfly shuffles (lane masks 16, 8, 4, 2, 1) leave the warp's result
  //    in all 32 lanes
  for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2)
    value = op(value, __shfl_xor_sync(kFullMask, value, lane_mask));
  if (threadIdx.x % 32 == 0) warp_results[threadIdx.x / 32] = value;
  __syncthreads();
  // 2. across warps, in warp order
  T result = warp_results[0];
  for (unsigned w = 1; w < blockDim.x / 32; ++w) result = op(result, warp_results[w]);
  __syncthreads();  // warp_results may be overwritten by the next reduction
  return result;
}

// N operands walked over one shape: the element at row-major position i of the shape is at
// offset[k] in operand k.
template <int N>
struct StridedIndex {
  int ndim = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[N][kMaxDims] = {};

  // Peels the coordinates of i off from the last dimension to the first.
  __host__ __device__ void offsets(int64_t i, int64_t (&offset)[N]) const {
    for (int k = 0; k < N; ++k) offset[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t coord = i % size[d];
      i /= size[d];
      for (int k = 0; k < N; ++k) offset[k] += coord * stride[k][d];
    }
  }
};

// The StridedIndex of `shape` walked by operands with `strides`, simplified; throws naming
// `kernel` and `t` when more than kMaxDims dimensions remain.
template <int N>
StridedIndex<N> make_strided_index(const char* kernel, const Tensor& t, const Shape& shape,
                                   const std::array<Shape, N>& strides) {
  const MergedDims<N> m = merge_dims<N>(shape, strides);
  GLASS_CHECK(m.shape.size() <= static_cast<size_t>(kMaxDims),
              "{}: {} has more than {} dimensions that cannot be merged", kernel, t.describe(),
              kMaxDims);
  StridedIndex<N> idx;
  idx.ndim = static_cast<int>(m.shape.size());
  for (int d = 0; d < idx.ndim; ++d) {
    idx.size[d] = m.shape[d];
    for (int k = 0; k < N; ++k) idx.stride[k][d] = m.strides[k][d];
  }
  return idx;
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
