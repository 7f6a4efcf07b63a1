// Kernels with the Tensor Core instructions of kernels/cuda/tensor_core.h: one warp multiplying a
// 16x16 by a 16x8 bf16 tile through cp.async, ldmatrix and mma, and kernels that break the
// instructions' rules on purpose.
#include <cstdint>

#include "kernels/cuda/tensor_core.h"

using namespace glass::kernels::cuda::tensor_core;

// d[16][8] = a[16][16] * b[16][8] + c[16][8] (all row-major; a, b bf16 bits; c, d f32), by one
// warp: both tiles copied to shared memory with cp.async (b in two groups, the second waited for
// last), A's registers by ldmatrix.x4, B's by ldmatrix.x2.trans (b is k-major: rows are k),
// then one mma. Any element in the wrong register gives a wrong d.
__global__ void mma_tile(const uint16_t* a, const uint16_t* b, const float* c, float* d) {
  __shared__ __align__(16) uint16_t sa[16 * 16];
  __shared__ __align__(16) uint16_t sb[16 * 8];
  const int lane = threadIdx.x;
  // a: 32 chunks of 16 bytes, one per lane; b: 16 chunks, lanes 0..15, as two groups
  cp_async_16(sa + lane * 8, a + lane * 8);
  cp_async_commit();
  if (lane < 8) cp_async_16(sb + lane * 8, b + lane * 8);
  cp_async_commit();
  if (lane >= 8 && lane < 16) cp_async_16(sb + lane * 8, b + lane * 8);
  cp_async_commit();
  cp_async_wait<0>();
  __syncwarp();
  uint32_t ra[4], rb[2];
  // x4: lanes 0..15 address rows 0..15 at column 0 (matrices 0, 1), lanes 16..31 column 8
  ldmatrix_x4(ra, sa + (lane % 16) * 16 + 8 * (lane / 16));
  // x2.trans: lanes 0..15 address rows k = 0..15 of b (matrix 0: k 0..7, matrix 1: k 8..15)
  ldmatrix_x2_trans(rb, sb + (lane % 16) * 8);
  float acc[4];
  for (int i = 0; i < 4; ++i) {
    const glass::mma::RowCol e = glass::mma::c_element(lane, i);
    acc[i] = c[e.row * 8 + e.col];
  }
  mma_m16n8k16_bf16(acc, ra, rb, acc);
  for (int i = 0; i < 4; ++i) {
    const glass::mma::RowCol e = glass::mma::c_element(lane, i);
    d[e.row * 8 + e.col] = acc[i];
  }
}

// Only lanes 0..15 execute the mma; the others exit: a diverged warp.
__global__ void mma_in_diverged_warp(float* out) {
  const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float acc[4] = {0, 0, 0, 0};
  if (threadIdx.x < 16) {
    mma_m16n8k16_bf16(acc, a, b, acc);
    out[threadIdx.x] = acc[0];
  }
}

// Lanes 0..15 execute one mma, lanes 16..31 another (a different line).
__global__ void mma_at_two_sites(float* out) {
  const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float acc[4] = {0, 0, 0, 0};
  if (threadIdx.x < 16)
    mma_m16n8k16_bf16(acc, a, b, acc);
  else
    mma_m16n8k16_bf16(acc, a, b, acc);
  out[threadIdx.x] = acc[0];
}

// ldmatrix.x1 from a row address 8 bytes past a 16-byte boundary.
__global__ void ldmatrix_misaligned(uint32_t* out) {
  __shared__ __align__(16) uint16_t s[8 * 16];
  for (int i = threadIdx.x; i < 8 * 16; i += 32) s[i] = static_cast<uint16_t>(i);
  __syncwarp();
  uint32_t r[1];
  ldmatrix_x1(r, s + (threadIdx.x % 8) * 16 + 4);
  out[threadIdx.x] = r[0];
}

// ldmatrix of a tile whose cp.async was committed but not waited for.
__global__ void ldmatrix_before_wait(const uint16_t* g, uint32_t* out) {
  __shared__ __align__(16) uint16_t s[8 * 8];
  if (threadIdx.x < 8) cp_async_16(s + threadIdx.x * 8, g + threadIdx.x * 8);
  cp_async_commit();
  __syncwarp();
  uint32_t r[1];
  ldmatrix_x1(r, s + (threadIdx.x % 8) * 8);
  cp_async_wait<0>();
  out[threadIdx.x] = r[0];
}

// Lanes disagree on the ldmatrix shape at one call: x4 in lanes 0..15, x2 in the others.
__global__ void ldmatrix_shapes_disagree(uint32_t* out) {
  __shared__ __align__(16) uint16_t s[32 * 8];
  for (int i = threadIdx.x; i < 32 * 8; i += 32) s[i] = 0;
  __syncwarp();
  uint32_t r[4] = {0, 0, 0, 0};
  glass::emu::detail::ldmatrix(r, threadIdx.x < 16 ? 4 : 2, false, s + threadIdx.x * 8,
                               GLASS_EMU_CALL_SITE);
  out[threadIdx.x] = r[0];
}

// Two groups of copies: after wait_group 1 only the first has landed, so the second's
// destination still reads as poison; after wait_group 0 both have. Also a zero-filled copy.
// out[0..3]: first group's words, out[4..7]: second's after wait 1, out[8..11]: after wait 0,
// out[12..15]: the zero-filled chunk.
__global__ void copy_groups(const uint32_t* g, uint32_t* out) {
  __shared__ __align__(16) uint32_t s[12];
  cp_async_16(s, g);
  cp_async_commit();
  cp_async_16(s + 4, g + 4);
  cp_async_commit();
  cp_async_16(s + 8, g + 8, /*valid=*/false);
  cp_async_commit();
  cp_async_wait<2>();
  for (int i = 0; i < 4; ++i) out[i] = s[i];
  for (int i = 0; i < 4; ++i) out[4 + i] = s[4 + i];
  cp_async_wait<0>();
  for (int i = 0; i < 4; ++i) out[8 + i] = s[4 + i];
  for (int i = 0; i < 4; ++i) out[12 + i] = s[8 + i];
}

// A group committed empty still counts among the most recent: after copy, commit, commit (nothing),
// wait_group 1 the copy has landed (a double-buffered loop's last step). out[0..3]: the words.
__global__ void copy_then_empty_group(const uint32_t* g, uint32_t* out) {
  __shared__ __align__(16) uint32_t s[4];
  cp_async_16(s, g);
  cp_async_commit();
  cp_async_commit();
  cp_async_wait<1>();
  for (int i = 0; i < 4; ++i) out[i] = s[i];
  cp_async_wait<0>();
}

// A thread that issues a cp.async and exits without waiting for it.
__global__ void copy_never_waited(const uint32_t* g, uint32_t* out) {
  __shared__ __align__(16) uint32_t s[4];
  cp_async_16(s, g);
  cp_async_commit();
  out[0] = 1;
}
