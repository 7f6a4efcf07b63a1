// The Tensor Core instructions of a hand-written Ampere/Hopper kernel, as device functions that
// compile to one PTX instruction each under nvcc and run on the emulator under emu:
//
//   mma_m16n8k16_bf16   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D = A B + C, one warp
//   ldmatrix_x{1,2,4}   ldmatrix.sync.aligned.m8n8.x{1,2,4}.shared.b16 (and .trans): 8x8 tiles of
//                       16-bit elements from shared memory into mma's fragment registers
//   cp_async_16         cp.async.cg.shared.global 16 bytes (zero-filled when !valid), then
//   cp_async_commit     cp.async.commit_group  and
//   cp_async_wait<N>    cp.async.wait_group N: all but the N most recent groups have landed
//
// Which element each lane's registers hold is engine/emu/mma_fragments.h, the one table of the
// layouts. The emulator (engine/emu/tensor_core.cpp) runs mma and ldmatrix as warp collectives:
// all 32 lanes must execute the same instruction (a lane that exited, or lanes at different
// instructions, is an error naming the kernel and line, where a GPU would be undefined); ldmatrix
// rows must be 16-byte aligned shared memory; a cp.async lands only at the wait that covers it,
// its destination reads as poison until then, an ldmatrix of a destination still in flight is an
// error, and a thread that exits with copies it never waited for is an error.
#pragma once

#include <cstdint>

#include "engine/emu/mma_fragments.h"

#if !defined(__CUDACC__)
#include "engine/emu/device_runtime.h"
#endif

namespace glass::kernels::cuda::tensor_core {

// A loop over fragments or accumulators that nvcc must unroll: indexed by the loop variable, an
// array stays in registers only when every index is a constant (otherwise it goes to local
// memory, which ptxas_resources.py refuses for an mma kernel). The host compiler of the emu build
// does not know the pragma.
#if defined(__CUDACC__)
#define GLASS_UNROLL _Pragma("unroll")
#else
#define GLASS_UNROLL
#endif

// Under emu each instruction takes its call site as a defaulted last argument (errors name it).
#if defined(__CUDACC__)
#define GLASS_TC_SITE
#define GLASS_TC_SITE_FIRST
#else
#define GLASS_TC_SITE , ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE
#define GLASS_TC_SITE_FIRST ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE
#endif

// Two bf16 (or any 16-bit values) packed as mma and ldmatrix hold them: `lo` in the low half.
__host__ __device__ inline uint32_t pack_b16(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// d = a * b + c on one warp (m16n8k16; a row-major 16x16 bf16, b column-major 16x8 bf16, c and d
// 16x8 f32). d may alias c.
__device__ inline void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2],
                                         const float (&c)[4] GLASS_TC_SITE) {
#if defined(__CUDACC__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  ::glass::emu::detail::mma_m16n8k16_bf16(d, a, b, c, site);
#endif
}

#if defined(__CUDACC__)
__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#endif

// ldmatrix: `row` is this lane's row address (lanes 8j..8j+7: rows 0..7 of matrix j; lanes past
// the matrices loaded pass any address, unused).
__device__ inline void ldmatrix_x1(uint32_t (&r)[1], const void* row GLASS_TC_SITE) {
#if defined(__CUDACC__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(row)));
#else
  ::glass::emu::detail::ldmatrix(r, 1, false, row, site);
#endif
}
__device__ inline void ldmatrix_x2(uint32_t (&r)[2], const void* row GLASS_TC_SITE) {
#if defined(__CUDACC__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
#else
  ::glass::emu::detail::ldmatrix(r, 2, false, row, site);
#endif
}
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* row GLASS_TC_SITE) {
#if defined(__CUDACC__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
#else
  ::glass::emu::detail::ldmatrix(r, 4, false, row, site);
#endif
}
__device__ inline void ldmatrix_x1_trans(uint32_t (&r)[1], const void* row GLASS_TC_SITE) {
#if defined(__CUDACC__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(row)));
#else
  ::glass::emu::detail::ldmatrix(r, 1, true, row, site);
#endif
}
__device__ inline void ldmatrix_x2_trans(uint32_t (&r)[2], const void* row GLASS_TC_SITE) {
#if defined(__CUDACC__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
#else
  ::glass::emu::detail::ldmatrix(r, 2, true, row, site);
#endif
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row GLASS_TC_SITE) {
#if defined(__CUDACC__)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
#else
  ::glass::emu::detail::ldmatrix(r, 4, true, row, site);
#endif
}

// 16 bytes from global `src` to shared `dst`, asynchronously (both 16-byte aligned). With
// valid = false nothing is read and dst is zero-filled (cp.async's src-size 0): the tail rows of
// a tile past the end of a matrix.
__device__ inline void cp_async_16(void* dst, const void* src, bool valid = true GLASS_TC_SITE) {
#if defined(__CUDACC__)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 16 : 0));
#else
  ::glass::emu::detail::cp_async(dst, src, 16, valid ? 16 : 0, site);
#endif
}

// Closes the group of this thread's cp.async issued since the last commit.
__device__ inline void cp_async_commit(GLASS_TC_SITE_FIRST) {
#if defined(__CUDACC__)
  asm volatile("cp.async.commit_group;\n" ::);
#else
  ::glass::emu::detail::cp_async_commit(site);
#endif
}

// Waits until at most `N` of this thread's committed groups are still in flight; N = 0: all.
// Other threads' copies are theirs: a __syncthreads() after the wait makes them visible.
template <int N>
__device__ inline void cp_async_wait(GLASS_TC_SITE_FIRST) {
#if defined(__CUDACC__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#else
  ::glass::emu::detail::cp_async_wait(N, site);
#endif
}

#undef GLASS_TC_SITE
#undef GLASS_TC_SITE_FIRST

}  // namespace glass::kernels::cuda::tensor_core
