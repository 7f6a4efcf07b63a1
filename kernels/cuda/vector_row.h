// 128-bit (16-byte) vector loads and stores for the memory-bound kernels, and the two ways they
// walk an array: a row split into a scalar head, 16-byte vectors and a scalar tail (row kernels:
// layernorm, classifier, the softmax and layernorm ladders), and a flat array cut into vectors
// with a scalar tail (elementwise maps, AdamW, embedding rows).
//
// Why: one 16-byte access moves 4 floats or 8 bf16 in one instruction, so a warp moves 512 bytes
// per load instead of 128 (f32) or 64 (bf16). The bytes are the same; the GPU issues a quarter (an
// eighth) of the memory instructions and keeps more bytes in flight per thread, which is what a
// memory-bound kernel needs to approach the bandwidth peak.
//
// A 16-byte access needs a 16-byte aligned address: on a GPU a misaligned one faults (CUDA error
// "misaligned address"), where x86 would silently accept it. So every vector access goes through
// load_vec / store_vec, whose host-compiled (emulator) build checks the address and throws an
// EmuError naming the address (the emulator adds the kernel, block and thread). Launchers never
// let that happen: they pass vectorised = false (the scalar path) for operands that are not 16-byte
// aligned (a view at an odd offset), and the row walk finds each row's own boundary.
//
// Row split. Row r of a [rows, cols] array starts at r * cols elements: aligned only when
// cols * sizeof(T) is a multiple of 16. So a row is split into
//   [0, head)                   scalars up to the first 16-byte boundary (head < kVecWidth<T>),
//   [head, head + W * vecs)     vectors of W = kVecWidth<T> elements,
//   [head + W * vecs, cols)     scalars: the tail.
// Every array a kernel walks at the same columns must reach a 16-byte boundary at `head`; when they
// do not (their addresses differ mod 16 bytes), the whole row is scalar.
// Thread mapping: thread t takes scalars t, t + blockDim.x, ... of the head and of the tail, and
// vectors t, t + blockDim.x, ... of the body: a warp reads 32 consecutive vectors (coalesced). The
// mapping depends only on the split, so a thread that walks a row twice meets its own columns.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "kernels/cuda/build.h"

#if !defined(__CUDACC__)
#include <string>

#include "engine/emu/error.h"
#endif

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

constexpr int kVecBytes = 16;

// Elements of T in one 16-byte vector: 4 floats, 8 bf16, 2 doubles.
template <class T>
inline constexpr int kVecWidth = kVecBytes / static_cast<int>(sizeof(T));

// One vector's elements, in registers.
template <class T>
struct alignas(kVecBytes) Vec {
  T v[kVecWidth<T>];
};

__host__ __device__ inline bool is_vec_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kVecBytes == 0;
}

// True when every (non-null) pointer is 16-byte aligned: a launcher's choice of the vector path.
template <class... P>
__host__ __device__ bool all_vec_aligned(const P*... p) {
  return ((p == nullptr || is_vec_aligned(p)) && ...);
}

// The emulator's stand-in for the GPU's misaligned-address fault. A no-op under nvcc.
__device__ inline void check_vec_aligned(const void* p, const char* access) {
#if !defined(__CUDACC__)
  if (!is_vec_aligned(p)) [[unlikely]] {
    char address[32];
    std::snprintf(address, sizeof(address), "%p", p);
    throw glass::emu::EmuError(std::string("misaligned 16-byte vector ") + access + " at address " +
                               address + " (a GPU faults: it must be 16-byte aligned)");
  }
#else
  (void)p;
  (void)access;
#endif
}

// The 16 bytes at p, in one 128-bit load; p must be 16-byte aligned.
template <class T>
__device__ inline Vec<T> load_vec(const T* p) {
  check_vec_aligned(p, "load");
  Vec<T> r;
#if defined(__CUDACC__)
  // the load intrinsic with the default cache policy (ld.global.ca), as store_vec uses one
  const uint4 bits = __ldca(reinterpret_cast<const uint4*>(p));
  memcpy(static_cast<void*>(&r), &bits, kVecBytes);  // a register move
#else
  std::memcpy(static_cast<void*>(&r), static_cast<const void*>(p), kVecBytes);
#endif
  return r;
}

// v into the 16 bytes at p, in one 128-bit store; p must be 16-byte aligned.
template <class T>
__device__ inline void store_vec(T* p, const Vec<T>& v) {
  check_vec_aligned(p, "store");
#if defined(__CUDACC__)
  uint32_t w[4];
  memcpy(w, static_cast<const void*>(&v), kVecBytes);
  // the store intrinsic, not an assignment: NVVM may split a plain 16-byte store of values it
  // can see into four 4-byte stores (st.global.wb is the default store policy)
  __stwb(reinterpret_cast<uint4*>(p), make_uint4(w[0], w[1], w[2], w[3]));
#else
  std::memcpy(static_cast<void*>(p), static_cast<const void*>(&v), kVecBytes);
#endif
}

// --- flat arrays: unit u of n elements is the vector [u W, u W + W) when vectorised (the last
// unit may be a scalar tail shorter than W), else element u.

// How many units cover n elements.
template <class T>
__host__ __device__ int64_t vec_units(int64_t n, bool vectorised) {
  return vectorised ? (n + kVecWidth<T> - 1) / kVecWidth<T> : n;
}

// vector(first) for a whole vector at element `first`, else scalar(i) for each element of the
// unit.
template <class T, class Vector, class Scalar>
__device__ void visit_unit(bool vectorised, int64_t u, int64_t n, Vector vector, Scalar scalar) {
  if (!vectorised) {
    if (u < n) scalar(u);
    return;
  }
  const int64_t first = u * kVecWidth<T>;
  if (first + kVecWidth<T> <= n) {
    vector(first);
    return;
  }
  for (int64_t i = first; i < n; ++i) scalar(i);
}

// --- rows

struct RowSplit {
  int64_t head, vecs;
};

// Elements of T from p back to the previous 16-byte boundary (p is aligned to sizeof(T)).
template <class T>
__device__ inline int64_t elements_past_boundary(const T* p) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p) % kVecBytes / sizeof(T));
}

// The split of a row of `cols` elements of T that the arrays `first`, `others`... (all of T,
// walked at the same columns) share; all scalar when they are not at one offset mod 16 bytes.
template <class T, class... Others>
__device__ RowSplit split_row(int64_t cols, const T* first, const Others*... others) {
  constexpr int W = kVecWidth<T>;
  const int64_t past = elements_past_boundary(first);
  const int64_t head = (W - past) % W;
  if (head > cols || !((others == nullptr || elements_past_boundary(others) == past) && ...))
    return {cols, 0};
  return {head, (cols - head) / W};
}

// Calls scalar(j) for this thread's scalar columns and vector(j) for its vectors (the vector of
// columns [j, j + W)).
template <class T, class Scalar, class Vector>
__device__ void walk_row(RowSplit s, int64_t cols, Scalar scalar, Vector vector) {
  constexpr int W = kVecWidth<T>;
  for (int64_t j = threadIdx.x; j < s.head; j += blockDim.x) scalar(j);
  for (int64_t v = threadIdx.x; v < s.vecs; v += blockDim.x) vector(s.head + W * v);
  for (int64_t j = s.head + W * s.vecs + threadIdx.x; j < cols; j += blockDim.x) scalar(j);
}

// f(j, x[j]) for every column j of this thread, x read in vectors where the split allows.
template <class T, class F>
__device__ void for_each_column(const T* x, RowSplit s, int64_t cols, F f) {
  walk_row<T>(
      s, cols, [&](int64_t j) { f(j, x[j]); },
      [&](int64_t j) {
        const Vec<T> q = load_vec(x + j);
        for (int k = 0; k < kVecWidth<T>; ++k) f(j + k, q.v[k]);
      });
}

// y[j] = g(j, x[j]) for every column j of this thread, read and written in vectors where the
// split allows (x and y must both be in the split).
template <class T, class G>
__device__ void map_row(const T* x, T* y, RowSplit s, int64_t cols, G g) {
  walk_row<T>(
      s, cols, [&](int64_t j) { y[j] = g(j, x[j]); },
      [&](int64_t j) {
        const Vec<T> q = load_vec(x + j);
        Vec<T> r;
        for (int k = 0; k < kVecWidth<T>; ++k) r.v[k] = g(j + k, q.v[k]);
        store_vec(y + j, r);
      });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
