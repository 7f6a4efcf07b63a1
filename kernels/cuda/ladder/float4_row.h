// One row of floats walked with 128-bit (float4) loads and stores, for the vectorised rungs.
//
// Why: a float4 access moves 16 bytes in one instruction, so a warp moves 512 bytes per load
// instead of 128. The bytes are the same; the GPU issues a quarter of the load and store
// instructions and keeps more bytes in flight per thread, which is what a memory-bound kernel
// needs to approach the bandwidth peak.
//
// A float4 access needs a 16-byte aligned address, and row r of a [rows, cols] tensor starts at
// r * cols floats: aligned only when cols is a multiple of 4. So a row is split into
//   [0, head)                     scalars up to the first 16-byte boundary (head < 4),
//   [head, head + 4 * vecs)       float4s,
//   [head + 4 * vecs, cols)       scalars: the tail when the rest is not a multiple of 4.
// The kernels read x and write y at the same columns, so both must reach a 16-byte boundary at
// `head`; when they do not (their offsets differ mod 4 floats), the whole row is scalar.
//
// Thread mapping: thread t takes scalars t, t + blockDim.x, ... of the head and of the tail, and
// vectors t, t + blockDim.x, ... of the body: a warp reads 32 consecutive float4s (coalesced).
#pragma once

#include <cstdint>

#include "kernels/cuda/build.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD::ladder {

struct RowSplit {
  int64_t head, vecs;
};

// Floats from p back to the previous 16-byte boundary (p is 4-byte aligned, as every float is).
__device__ inline int64_t floats_past_boundary(const float* p) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) / sizeof(float) % 4);
}

__device__ inline RowSplit split_row(const float* x, const float* y, int64_t cols) {
  const int64_t head = (4 - floats_past_boundary(x)) % 4;
  if (head > cols || floats_past_boundary(x) != floats_past_boundary(y)) return {cols, 0};
  return {head, (cols - head) / 4};
}

// Calls scalar(j) for this thread's scalar columns and vector(v, j) for its float4s (v-th vector
// of the body, starting at column j).
template <class Scalar, class Vector>
__device__ void walk_row(RowSplit s, int64_t cols, Scalar scalar, Vector vector) {
  for (int64_t j = threadIdx.x; j < s.head; j += blockDim.x) scalar(j);
  for (int64_t v = threadIdx.x; v < s.vecs; v += blockDim.x) vector(v, s.head + 4 * v);
  for (int64_t j = s.head + 4 * s.vecs + threadIdx.x; j < cols; j += blockDim.x) scalar(j);
}

// f(j, x[j]) for every column j of this thread, x read as float4s where the split allows.
template <class F>
__device__ void for_each_column(const float* x, RowSplit s, int64_t cols, F f) {
  const float4* xv = reinterpret_cast<const float4*>(x + s.head);
  walk_row(
      s, cols, [&](int64_t j) { f(j, x[j]); },
      [&](int64_t v, int64_t j) {
        const float4 q = xv[v];
        f(j, q.x);
        f(j + 1, q.y);
        f(j + 2, q.z);
        f(j + 3, q.w);
      });
}

// y[j] = g(j, x[j]) for every column j of this thread, read and written as float4s where the
// split allows.
template <class G>
__device__ void map_row(const float* x, float* y, RowSplit s, int64_t cols, G g) {
  const float4* xv = reinterpret_cast<const float4*>(x + s.head);
  float4* yv = reinterpret_cast<float4*>(y + s.head);
  walk_row(
      s, cols, [&](int64_t j) { y[j] = g(j, x[j]); },
      [&](int64_t v, int64_t j) {
        const float4 q = xv[v];
        yv[v] = float4{g(j, q.x), g(j + 1, q.y), g(j + 2, q.z), g(j + 3, q.w)};
      });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD::ladder
