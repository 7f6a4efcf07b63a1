// FlashAttention-2 on the Tensor Cores, forward and backward, written by hand: the math, layouts
// and contract of kernels/cuda/flash_attention.cu (the CUDA-core kernel, `--attention
// flash-simt`), bf16 only, with every product of two tiles an mma.sync.m16n8k16 (bf16 in, f32
// accumulation; kernels/cuda/tensor_core.h) instead of CUDA-core FMAs.
//
//   S = Q K^T * scale, causal;  P = softmax rows of S;  O = P V;  lse_i = log sum_j exp(S_ij)
//   backward: D_i = rowsum(dO_i * O_i);  dP = dO V^T;  dS = P * (dP - D)
//             dV = P^T dO;  dQ = dS K * scale;  dK = dS^T Q * scale
//
// qkv bf16 [B, T, (H + 2 Hkv) D] is read where the qkv projection wrote it (kernels/cuda/
// qkv_heads.h: query head h reads key/value head h / (H / Hkv), grouped-query attention; Hkv = H
// is qkv [B, T, 3C]); out bf16 [B, T, C = H D]; lse f32 [B, H, T] (natural log, as flash-simt
// saves it).
// Head dims D = 32, 64, 128 (a template parameter: every fragment array has a compile-time size,
// so ptxas keeps all of them in registers; `-Xptxas -v` reports 0 bytes of local memory, stack
// and spills for every kernel here). Registers on sm_90 for D = 32 / 64 / 128: forward
// 119 / 128 / 191, query kernel 127 / 128 / 236, key kernel 128 / 199 / 246; blocks_per_sm below
// asks ptxas for two 256-thread blocks per SM (at most 128 registers) where that costs no spill,
// so an SM holds 16 warps of every D <= 64 kernel but the D = 64 key kernel, and 8 warps (one
// block) of that one and of the D = 128 kernels (by registers; 4-warp blocks held 16, 16 and 12
// warps of the D = 64 forward, query and key kernels, 24 of the D = 32 forward, 8 at D = 128).
//
// Blocks are 8 warps, as in FlashAttention-2: a warp owns 16 rows of the block's 128 (the m of
// mma) and the whole head dim, so a lane's registers are those of a 64-row tile of 4 warps, and
// each K, V (or Q, dO) tile a block loads from global memory serves twice the rows: the re-reads
// of the causal walk halve (key_rows_loaded, query_rows_loaded: at T = 1024, 4608 rows per head
// instead of 8704). D = 128 takes the same tiles: the registers per lane do not grow with the
// tile's height, 8 warps of up to 246 registers fit an SM's 64 K (one block, as two 4-warp blocks
// did), and the query kernel's 136 KB of shared memory fits the 227 KB a block may have.
// - forward `flash_attention_forward_mma`, block (query tile of 128 rows, slice): Q's fragments are
//   loaded once into registers; for each key tile of 64 keys up to the diagonal, S (16 x 64 per
//   warp, 32 f32 accumulators per lane) = Q K^T by mma, then the online softmax on those
//   accumulators in registers (running max m and sum l per row; O rescaled by exp(m_old - m_new)),
//   then O += P V by mma, P taken straight from the S accumulators rounded to bf16: the C layout
//   of two n8 accumulator tiles (row g and g+8, columns 2t, 2t+1 of each) is exactly the A layout
//   of one k16 tile (engine/emu/mma_fragments.h), so P never leaves the registers. Nothing of
//   size T x T exists: S and P live in registers only. O / l and lse = m + log l are written once.
// - backward `flash_attention_backward_mma_query`, block (query tile of 128 rows, slice): D_i for
//   its rows (written to a scratch [B, H, T] for the key kernel), then for each key tile up to the
//   diagonal S and dP = dO V^T by mma, P = exp(S - lse) and dS = P (dP - D) on the accumulators,
//   and dQ += dS K by mma (dS reused in registers as the A operand, as P in the forward).
// - backward `flash_attention_backward_mma_key`, block (key tile of 128 keys, key/value slice): for
//   each query head of the key/value head in order (grouped-query attention sums their dK and dV),
//   for each query tile from the diagonal on, S^T = K Q^T and dP^T = V dO^T by mma (the warp's 16
//   keys are the m rows), P^T and dS^T on the accumulators, and dV += P^T dO, dK += dS^T Q by mma.
//   The query tiles are 64 rows for D <= 64 and 32 for D = 128 (dK and dV of 16 x 128 take 128
//   accumulator registers per lane; the narrower tile keeps S^T and dP^T at 16 each, under 255 in
//   all).
// Both backward launches carry the prefix `flash_attention_backward_mma`; the query kernel runs
// first (the key kernel reads its D). Every output element is summed by one lane in a fixed order
// (an mma's k-sum, then the tiles in order): no atomics, the same bits on every run.
//
// Causal masking happens per warp on the diagonal only: the block walks the tiles up to its last
// row (forward, query kernel: key tiles 0 .. last_key_tile; key kernel: query tiles from its first
// key on), and for each tile a warp (16 rows) either skips the math, when all its rows lie before
// the tile's first key (key kernel: all its keys after the tile's last query; P = 0 there), or
// masks, when the tile's last key passes its first row, or neither (the tile wholly at or before
// its first row). A 128-row query tile spans two 64-key diagonal tiles: on the first, warps 0-3
// mask and warps 4-7 need no mask; on the second, warps 0-3 skip and warps 4-7 mask. A skipping
// warp still issues its share of the cp.async copies and meets every barrier; the skip is uniform
// over the warp, so every mma runs in a converged warp. The mask is computed in int, relative to
// the warp's first row (-64 < offset < 16 on a diagonal tile). Tails (T not a multiple of the
// tile): rows past T are zero-filled by cp.async's src-size 0; keys past T only occur in the last
// key tile, which every row < T of a warp that reaches it sees masked (key j >= T > row i); query
// rows past T compute harmless finite values and are never stored (a warp whose rows all lie past
// T works on zeros); in the key kernel their lse is read as +inf, so their P (and dS) is exactly 0.
//
// The softmax runs in base 2: x = S * scale * log2(e), so exp(S*scale - m) = exp2(x - m2), one
// FMUL less per element; lse goes back to natural log when stored and read.
//
// Shared memory: bf16 tiles [rows][D + 8] (row pitch D + 8 elements = D/2 + 4 words of 4 bytes,
// i.e. 16 bytes of padding per row). Banks are 32 words; a 16-byte row piece covers one "bank
// quad" (4 banks) and shared memory serves 8 such pieces per cycle (one ldmatrix phase, or one
// quarter-warp of 16-byte stores). Row r starts at word r * (D/2 + 4), i.e. bank quad
// r * (D/8 + 1) mod 8, and D/8 + 1 = 5, 9, 17 for D = 32, 64, 128 is odd, so the 8 rows of one
// 8x8 ldmatrix matrix (consecutive rows, same columns) land on the 8 different quads:
// conflict-free, for any 8 consecutive rows of any tile: the 128-row tiles (Q and dO of the query
// kernel, K and V of the key kernel) and the two adjacent 64-row K, V tiles of a forward buffer
// that hold Q's 128 rows, and O's staging, keep the same pitch. (Unpadded, the pitch is D/2 words:
// for D >= 64 a multiple of 32, so all 8 rows hit the same quad, 8-way; at D = 32 rows alternate
// between two quads, 4-way.) The cp.async stores are mapped the same way: 8 consecutive threads
// write one 16-byte column chunk of 8 consecutive rows (quads (r * (D/8 + 1) + c) mod 8: distinct),
// while a warp still reads whole 64-byte row segments from global memory (coalesced). The
// accumulator stores of the epilogue (O, dQ, dK, dV staged through shared memory for 16-byte global
// stores) write 4 bytes per lane at row g, word 4n
// + t of the tile: bank (g * (D/2 + 4) + 4n + t) mod 32 = 4 * (g * (D/8 + 1) mod 8) + t + const,
// all 32 lanes distinct.
//
// Pipelining: the tiles the loop walks (K and V in the forward and the query kernel, Q, dO, lse
// and D in the key kernel) are double-buffered: iteration n issues the cp.async of tile n + 1 into
// the other buffer, commits it, and waits with cp.async.wait_group 1, i.e. for tile n only, so
// tile n + 1's copy runs during tile n's math (the last iteration commits an empty group, which
// keeps the count uniform); a barrier after the math frees tile n's buffer for tile n + 2.
// Shared memory per block (bf16, pitch D + 8), D = 32 / 64 / 128: forward 2 x (K, V) of 64 rows
// (Q's 128 rows pass through buffer 1 first), 20 / 36 / 68 KB; query kernel Q, dO of 128 rows + 2
// x (K, V) of 64, 40 / 72 / 136 KB; key kernel K, V of 128 rows + 2 x (Q, dO of 64 rows, 32 at
// D = 128, with their lse and D), 41 / 73 / 102.5 KB (KB = 1024 bytes). Over 48 KB the launcher
// opts in (kernels/cuda/shared_memory.h); two blocks per SM fit the 228 KB of an H100/H200 SM where
// blocks_per_sm asks for them (at most 2 x 73 KB), one block the D = 128 kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/emu/dynamic_shared.h"
#include "engine/emu/mma_fragments.h"
#include "kernels/costs/attention.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/qkv_heads.h"
#include "kernels/cuda/shared_memory.h"
#include "kernels/cuda/tensor_core.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

namespace tc = tensor_core;

constexpr int kWarps = 8;
constexpr int kBlockThreads = 32 * kWarps;
constexpr int kWarpRows = 16;                   // rows of one warp: mma's m
constexpr int kBlockRows = kWarps * kWarpRows;  // 128: query rows of a forward / query-kernel
                                                // block, keys of a key-kernel block
constexpr int kKeyTile = 64;  // keys of one tile the forward and the query kernel walk
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
__host__ __device__ constexpr int
pitch() {  // bf16 elements per shared-memory tile row (header: bank arithmetic)
  return D + 8;
}
// The last key tile (64 keys) the query tile of rows q0 .. q0 + 127 walks in the forward and the
// query kernel: the causal range ends at key min(T, q0 + 128) - 1.
__host__ __device__ constexpr int64_t last_key_tile(int64_t q0, int64_t T) {
  return ((T < q0 + kBlockRows ? T : q0 + kBlockRows) - 1) / kKeyTile;
}
// Blocks per SM that ptxas must make room for (__launch_bounds__'s minimum: at most 65536 / (256
// n) registers per thread, 128 for n = 2): two where the kernel fits in 128 registers without
// spilling, so that an SM keeps 16 warps; the D = 128 kernels and the D = 64 key kernel (dK and
// dV accumulators of 16 x 64 f32 per warp, 64 registers a lane, and S^T and dP^T of 16 x 64,
// another 64) need more: one block, 8 warps.
enum class Pass { forward, query, key };
template <Pass pass, int D>
__host__ __device__ constexpr int blocks_per_sm() {
  return D == 128 || (pass == Pass::key && D == 64) ? 1 : 2;
}
template <int D>
__host__ __device__ constexpr int key_kernel_queries() {  // query rows per tile of the key kernel
  return D > 64 ? 32 : 64;
}

struct alignas(16) Chunk16 {  // 8 bf16: one cp.async, one ldmatrix row, one vector store
  uint32_t word[4];
};

// Rows row0.. row0 + rows - 1 of one head (global row stride `stride` elements) into the tile
// [rows][D + 8], asynchronously; rows at or past T are zero-filled. `rows` is a multiple of 8.
// 8 consecutive threads take one 16-byte column chunk of 8 consecutive rows (header).
template <int D>
__device__ void load_tile_async(bf16* tile, const bf16* head, int64_t stride, int64_t row0,
                                int64_t T, int rows) {
  constexpr int kChunks = D / 8;
  for (int idx = threadIdx.x; idx < rows * kChunks; idx += blockDim.x) {
    const int r = idx % 8 + 8 * (idx / (8 * kChunks)), c = (idx / 8) % kChunks;
    const int64_t row = row0 + r;
    const bool valid = row < T;
    tc::cp_async_16(tile + r * pitch<D>() + c * 8, head + (valid ? row : 0) * stride + c * 8,
                    valid);
  }
}

// Step kt of the loops over key tiles 0..last (forward, query kernel; k and v rows `stride`
// elements apart): queues key and value tile kt + 1 into the other buffers while tile kt is used
// (nothing after the last: the commit then makes an empty group, so that wait_group 1 still means
// "tile kt"), then waits until tile kt has landed, this thread's part (wait_group) and everyone's
// (__syncthreads).
template <int D>
__device__ void next_key_value_tile(bf16* k_next, bf16* v_next, const bf16* k, const bf16* v,
                                    int64_t stride, int64_t kt, int64_t last, int64_t T) {
  if (kt < last) {
    load_tile_async<D>(k_next, k, stride, (kt + 1) * kKeyTile, T, kKeyTile);
    load_tile_async<D>(v_next, v, stride, (kt + 1) * kKeyTile, T, kKeyTile);
  }
  tc::cp_async_commit();
  tc::cp_async_wait<1>();
  __syncthreads();
}

// The warp's 16 rows of a staging tile [.][D + 8] (rows row0..) copied to global rows
// grow0 + r (stride elements apart; rows at or past T skipped), 16 bytes per lane per step, the
// same chunk mapping as load_tile_async.
template <int D>
__device__ void store_rows(bf16* global, int64_t stride, int64_t grow0, int64_t T, const bf16* tile,
                           int row0, int lane) {
  constexpr int kChunks = D / 8;
  for (int idx = lane; idx < kWarpRows * kChunks; idx += 32) {
    const int r = idx % 8 + 8 * (idx / (8 * kChunks)), c = (idx / 8) % kChunks;
    if (grow0 + r < T)
      *reinterpret_cast<Chunk16*>(global + (grow0 + r) * stride + c * 8) =
          *reinterpret_cast<const Chunk16*>(tile + (row0 + r) * pitch<D>() + c * 8);
  }
}

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  return tc::pack_b16(from_compute<bf16>(lo).bits, from_compute<bf16>(hi).bits);
}

// A fragment of mma: the 16 x 16 block at (row0, col0) of a row-major tile [.][D + 8].
// Lane l addresses row l % 16, column half l / 16: matrices 0..3 = a0..a3 (mma_fragments.h).
template <int D>
__device__ void load_a(uint32_t (&a)[4], const bf16* tile, int row0, int col0, int lane) {
  tc::ldmatrix_x4(a, tile + (row0 + lane % 16) * pitch<D>() + col0 + 8 * (lane / 16));
}

// B fragments of two n8 tiles (n0.., n0 + 8..) over k0..k0 + 15, from a tile stored [n][k]
// (k contiguous: K for S = Q K^T). Matrix j = rows n0 + 8 (j / 2).., columns k0 + 8 (j % 2)..;
// without .trans a lane gets row g, columns 2t, 2t+1 = B's (k = 2t.., n = g): b = {b0, b1} of
// tile n0 in b[0..1], of tile n0 + 8 in b[2..3].
template <int D>
__device__ void load_b_nk(uint32_t (&b)[4], const bf16* tile, int n0, int k0, int lane) {
  const int j = lane / 8;
  tc::ldmatrix_x4(b, tile + (n0 + 8 * (j / 2) + lane % 8) * pitch<D>() + k0 + 8 * (j % 2));
}

// The same two B fragments from a tile stored [k][n] (n contiguous: V for P V): matrix j = rows
// k0 + 8 (j % 2).., columns n0 + 8 (j / 2)..; .trans gives a lane rows 2t, 2t+1 of column g.
template <int D>
__device__ void load_b_kn(uint32_t (&b)[4], const bf16* tile, int k0, int n0, int lane) {
  const int j = lane / 8;
  tc::ldmatrix_x4_trans(b, tile + (k0 + 8 * (j % 2) + lane % 8) * pitch<D>() + n0 + 8 * (j / 2));
}

// acc[n] += A * B over the two n8 tiles in b (load_b_*): acc[n] and acc[n + 1]
__device__ inline void mma_pair(float (&acc0)[4], float (&acc1)[4], const uint32_t (&a)[4],
                                const uint32_t (&b)[4]) {
  const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
  tc::mma_m16n8k16_bf16(acc0, a, b0, acc0);
  tc::mma_m16n8k16_bf16(acc1, a, b1, acc1);
}

// acc [16 x 8 N] += (A tile rows a_row0.. of `a_tile`) (B tile [n][k] rows n.. of `b_tile`)^T
// over the head dim: S = Q K^T and friends (A and B both [row][head dim] in shared memory).
template <int D, int N>
__device__ void mma_rows_dot_rows(float (&acc)[N][4], const bf16* a_tile, int a_row0,
                                  const bf16* b_tile, int lane) {
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t a[4];
    load_a<D>(a, a_tile, a_row0, kk * 16, lane);
    for (int n = 0; n < N; n += 2) {
      uint32_t b[4];
      load_b_nk<D>(b, b_tile, n * 8, kk * 16, lane);
      mma_pair(acc[n], acc[n + 1], a, b);
    }
  }
}

// acc [16 x D] += P [16 x 8 N] V [8 N x D], P given as f32 accumulators (N n8 tiles) rounded to
// bf16 here, V a tile [8 N][D + 8] in shared memory. Two n8 accumulator tiles 2kk, 2kk + 1 are
// one k16 A fragment: a0 = (g, 2t..) of 2kk, a1 = (g + 8, 2t..) of 2kk, a2, a3 the same of 2kk + 1.
template <int D, int N>
__device__ void mma_probs_times_tile(float (&acc)[D / 8][4], const float (&p)[N][4],
                                     const bf16* v_tile, int lane) {
  for (int kk = 0; kk < N / 2; ++kk) {
    const uint32_t a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]),
                           pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                           pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
    for (int n = 0; n < D / 8; n += 2) {
      uint32_t b[4];
      load_b_kn<D>(b, v_tile, kk * 16, n * 8, lane);
      mma_pair(acc[n], acc[n + 1], a, b);
    }
  }
}

// The accumulators acc [16 x D] (times `factor`) as bf16 into rows row0.. of a staging tile
// [.][D + 8]: lane (g, t) writes rows g and g + 8, columns 8n + 2t, 8n + 2t + 1 (4 bytes).
template <int D>
__device__ void stage_accumulators(bf16* tile, int row0, const float (&acc)[D / 8][4],
                                   float factor0, float factor1, int lane) {
  const int g = mma::lane_group(lane), t = mma::lane_thread(lane);
  for (int n = 0; n < D / 8; ++n) {
    *reinterpret_cast<uint32_t*>(tile + (row0 + g) * pitch<D>() + 8 * n + 2 * t) =
        pack_bf16(acc[n][0] * factor0, acc[n][1] * factor0);
    *reinterpret_cast<uint32_t*>(tile + (row0 + g + 8) * pitch<D>() + 8 * n + 2 * t) =
        pack_bf16(acc[n][2] * factor1, acc[n][3] * factor1);
  }
}

// Sum or max over the 4 lanes of a group (the lanes holding one accumulator row), butterfly:
// every lane gets the result. Every lane of the warp must call it.
template <class Op>
__device__ float group_reduce(float value, Op op) {
  value = op(value, __shfl_xor_sync(kFullMask, value, 1));
  return op(value, __shfl_xor_sync(kFullMask, value, 2));
}

// The causal mask of a diagonal tile on a warp's scores acc [16 queries x 8 N keys] (lane (g, t)
// holds rows g, g + 8 and columns 8n + 2t, 8n + 2t + 1): entries whose key lies after their
// query become `masked`, where the tile's first key lies `ahead` keys past the warp's first query
// (-64 < ahead < 16 on a diagonal tile: an int, not the int64 positions).
template <int N>
__device__ void mask_after_diagonal(float (&acc)[N][4], int ahead, float masked, int lane) {
  const int g = mma::lane_group(lane), t = mma::lane_thread(lane);
  for (int n = 0; n < N; ++n)
    for (int e = 0; e < 4; ++e)
      if (ahead + 8 * n + 2 * t + e % 2 > g + 8 * (e / 2)) acc[n][e] = masked;
}

// The forward's steps 4 and 5 for one key tile: the online softmax of the warp's scores x (log2
// units, -inf where masked; N n8 tiles) per row (r = 0: row g, elements 0, 1; r = 1: row g + 8,
// elements 2, 3): running max m and this lane's sum l, O rescaled by exp2(m_old - m_new); then O
// += P V with P = exp2(x - m_new) from the registers. m_new must be finite.
template <int D, int N>
__device__ void online_softmax_and_pv(float (&o)[D / 8][4], float (&s)[N][4], float (&m)[2],
                                      float (&l)[2], const bf16* v_tile, int lane) {
  for (int r = 0; r < 2; ++r) {
    float mx = -INFINITY;
    for (int n = 0; n < N; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    const float m_new = fmaxf(m[r], group_reduce(mx, Max{}));
    const float rescale = exp2f(m[r] - m_new);  // 0 on the first tile (m = -inf)
    float sum = 0;
    for (int n = 0; n < N; ++n)
      for (int e = 2 * r; e < 2 * r + 2; ++e) {
        s[n][e] = exp2f(s[n][e] - m_new);
        sum += s[n][e];
      }
    l[r] = l[r] * rescale + sum;
    m[r] = m_new;
    for (int n = 0; n < D / 8; ++n) {
      o[n][2 * r] *= rescale;
      o[n][2 * r + 1] *= rescale;
    }
  }
  mma_probs_times_tile<D>(o, s, v_tile, lane);
}

// ---------------------------------------------------------------------------------------------
// Forward. Grid (query tiles of 128 rows, B*H), heaviest (last) query tiles first. Dynamic shared
// memory: two buffers of K and V tiles [64][D + 8]; Q (128 rows) passes through buffer 1 (K and V
// tile 1 are adjacent: one [128][D + 8] tile) first.
template <int D>
__global__ void __launch_bounds__(kBlockThreads, blocks_per_sm<Pass::forward, D>())
    flash_attention_forward_mma_kernel(const bf16* qkv, bf16* out, float* lse, QkvHeads x,
                                       float scale_log2) {
  constexpr int P = pitch<D>(), kTileElems = kKeyTile * P, kN = kKeyTile / 8;
  const int64_t T = x.T, W = x.width();
  GLASS_DYNAMIC_SHARED(bf16, shared);
  // buffer i: K at shared + 2i tiles, V after it (pointer arithmetic rather than arrays of
  // pointers indexed at run time, which ptxas would put on the stack)
  auto Ks = [&](int i) { return shared + 2 * i * kTileElems; };
  auto Vs = [&](int i) { return shared + (2 * i + 1) * kTileElems; };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = mma::lane_group(lane), t = mma::lane_thread(lane);
  const int64_t slice = blockIdx.y;
  const int64_t q0 = (gridDim.x - 1 - blockIdx.x) * static_cast<int64_t>(kBlockRows);
  const int w0 = warp * kWarpRows;
  const int64_t first_row = q0 + w0;  // the warp's rows: first_row .. first_row + 15
  const int64_t last = last_key_tile(q0, T);
  const bf16* k = qkv + x.k_at(slice);
  const bf16* v = qkv + x.v_at(slice);
  // 1. Q (through buffer 1), K and V tile 0; Q's A fragments into registers for good
  load_tile_async<D>(Ks(1), qkv + x.q_at(slice), W, q0, T, kBlockRows);
  load_tile_async<D>(Ks(0), k, W, 0, T, kKeyTile);
  load_tile_async<D>(Vs(0), v, W, 0, T, kKeyTile);
  tc::cp_async_commit();
  tc::cp_async_wait<0>();
  __syncthreads();
  uint32_t qa[D / 16][4];
  for (int kk = 0; kk < D / 16; ++kk) load_a<D>(qa[kk], Ks(1), w0, kk * 16, lane);
  __syncthreads();  // buffer 1 is free for key tile 1
  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};  // running max (log2 units), this lane's sum
  for (int64_t kt = 0; kt <= last; ++kt) {
    const int buf = kt % 2;
    // 2. prefetch key tile kt + 1 into the other buffer (an empty group on the last tile)
    next_key_value_tile<D>(Ks(1 - buf), Vs(1 - buf), k, v, W, kt, last, T);
    // The tile's first key against the warp's first row: a warp whose rows all lie before the
    // tile (ahead >= 16) skips it, every entry masked, but keeps to the barriers; the mask is
    // needed where the tile's last key passes the warp's first row (ahead > -64: the diagonal;
    // it also covers keys past T for rows < T).
    const int64_t ahead = kt * kKeyTile - first_row;
    if (ahead < kWarpRows) {
      // 3. S = Q K^T for the warp's 16 rows x 64 keys; x = S * scale * log2(e)
      float s[kN][4] = {};
      for (int kk = 0; kk < D / 16; ++kk)
        for (int n = 0; n < kN; n += 2) {
          uint32_t bk[4];
          load_b_nk<D>(bk, Ks(buf), n * 8, kk * 16, lane);
          mma_pair(s[n], s[n + 1], qa[kk], bk);
        }
      for (int n = 0; n < kN; ++n)
        for (int e = 0; e < 4; ++e) s[n][e] *= scale_log2;
      if (ahead > -kKeyTile) mask_after_diagonal(s, static_cast<int>(ahead), -INFINITY, lane);
      // 4, 5. online softmax and O += P V; every row meets an unmasked key (key 0) in tile 0, so
      //    m_new is finite
      online_softmax_and_pv<D, kN>(o, s, m, l, Vs(buf), lane);
    }
    __syncthreads();  // tile kt is read: its buffer takes tile kt + 2
  }
  tc::cp_async_wait<0>();  // only empty groups remain
  // 6. O / l staged through buffer 0 (K and V tile 0 are adjacent: 128 rows; the loop's last
  //    barrier: nobody reads it any more) and written with 16-byte stores; lse = (m + log2 l) ln 2
  for (int r = 0; r < 2; ++r) l[r] = group_reduce(l[r], Sum{});
  stage_accumulators<D>(Ks(0), w0, o, 1.0f / l[0], 1.0f / l[1], lane);
  __syncwarp();
  store_rows<D>(out + x.out_at(slice), x.out_width(), first_row, T, Ks(0), w0, lane);
  if (t == 0)
    for (int r = 0; r < 2; ++r) {
      const int64_t row = first_row + g + 8 * r;
      if (row < T) lse[slice * T + row] = (m[r] + log2f(l[r])) * kLn2;
    }
}

// ---------------------------------------------------------------------------------------------
// Backward, query kernel: D and dQ. Grid (query tiles of 128 rows, B*H), heaviest first. Dynamic
// shared memory: Q and dO tiles [128][D + 8], then two buffers of K and V tiles [64][D + 8].
template <int D>
__global__ void __launch_bounds__(kBlockThreads, blocks_per_sm<Pass::query, D>())
    flash_attention_backward_mma_query_kernel(const bf16* qkv, const bf16* out, const float* lse,
                                              const bf16* dout, float* delta, bf16* dqkv,
                                              QkvHeads x, float scale, float scale_log2) {
  constexpr int P = pitch<D>(), kTileElems = kKeyTile * P, kN = kKeyTile / 8;
  const int64_t T = x.T, W = x.width(), C = x.out_width();
  GLASS_DYNAMIC_SHARED(bf16, shared);
  bf16* Qs = shared;
  bf16* dOs = Qs + kBlockRows * P;
  bf16* key_buffers = dOs + kBlockRows * P;
  auto Ks = [&](int i) { return key_buffers + 2 * i * kTileElems; };  // buffer i (no arrays of
  auto Vs = [&](int i) { return key_buffers + (2 * i + 1) * kTileElems; };  // pointers: forward)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = mma::lane_group(lane), t = mma::lane_thread(lane);
  const int64_t slice = blockIdx.y;
  const int64_t q0 = (gridDim.x - 1 - blockIdx.x) * static_cast<int64_t>(kBlockRows);
  const int w0 = warp * kWarpRows;
  const int64_t first_row = q0 + w0;  // the warp's rows: first_row .. first_row + 15
  const int64_t row[2] = {first_row + g, first_row + g + 8};
  const int64_t last = last_key_tile(q0, T);  // as the forward
  const bf16* k = qkv + x.k_at(slice);
  const bf16* v = qkv + x.v_at(slice);
  // 1. Q, dO and key tile 0
  load_tile_async<D>(Qs, qkv + x.q_at(slice), W, q0, T, kBlockRows);
  load_tile_async<D>(dOs, dout + x.out_at(slice), C, q0, T, kBlockRows);
  load_tile_async<D>(Ks(0), k, W, 0, T, kKeyTile);
  load_tile_async<D>(Vs(0), v, W, 0, T, kKeyTile);
  tc::cp_async_commit();
  tc::cp_async_wait<0>();
  __syncthreads();
  // 2. D_i = dO_i . O_i for rows g, g + 8: lane t takes the 16-byte chunks t, t + 4, ...; saved
  //    for the key kernel. lse_i in log2 units (0 for rows past T: finite, never stored).
  float delta_r[2], lse2[2];
  for (int r = 0; r < 2; ++r) {
    float part = 0;
    if (row[r] < T) {
      const bf16* o = out + x.out_at(slice) + row[r] * C;
      const bf16* d_o = dOs + (w0 + g + 8 * r) * P;
      for (int c = t; c < D / 8; c += 4)
        for (int e = 0; e < 8; ++e) part += to_compute(d_o[8 * c + e]) * to_compute(o[8 * c + e]);
    }
    delta_r[r] = group_reduce(part, Sum{});
    lse2[r] = row[r] < T ? lse[slice * T + row[r]] * kLog2e : 0.0f;
    if (row[r] < T && t == 0) delta[slice * T + row[r]] = delta_r[r];
  }
  float dq[D / 8][4] = {};
  for (int64_t kt = 0; kt <= last; ++kt) {
    const int buf = kt % 2;
    next_key_value_tile<D>(Ks(1 - buf), Vs(1 - buf), k, v, W, kt, last, T);
    // the tile's first key against the warp's first row: skipped, masked or whole as in the
    // forward
    const int64_t ahead = kt * kKeyTile - first_row;
    if (ahead < kWarpRows) {
      // 3. S = Q K^T and dP = dO V^T for the warp's 16 rows x 64 keys
      float s[kN][4] = {}, dp[kN][4] = {};
      mma_rows_dot_rows<D>(s, Qs, w0, Ks(buf), lane);
      mma_rows_dot_rows<D>(dp, dOs, w0, Vs(buf), lane);
      // 4. P = exp2(S scale log2(e) - lse2), 0 past the diagonal; dS = P (dP - D) into s
      for (int n = 0; n < kN; ++n)
        for (int e = 0; e < 4; ++e) s[n][e] = exp2f(s[n][e] * scale_log2 - lse2[e / 2]);
      if (ahead > -kKeyTile) mask_after_diagonal(s, static_cast<int>(ahead), 0.0f, lane);
      for (int n = 0; n < kN; ++n)
        for (int e = 0; e < 4; ++e) s[n][e] *= dp[n][e] - delta_r[e / 2];
      // 5. dQ += dS K (K read as [key][dim]: the B operand by ldmatrix .trans)
      mma_probs_times_tile<D>(dq, s, Ks(buf), lane);
    }
    __syncthreads();
  }
  tc::cp_async_wait<0>();
  // 6. dQ = dq * scale into the q columns of dqkv, staged through the warp's own rows of Qs (only
  //    this warp ever read them)
  stage_accumulators<D>(Qs, w0, dq, scale, scale, lane);
  __syncwarp();
  store_rows<D>(dqkv + x.q_at(slice), W, first_row, T, Qs, w0, lane);
}

// Backward, key kernel: dK and dV. Grid (key tiles of 128, B*Hkv), heaviest (first) key tiles
// first in launch order; a block walks the query tiles of its key/value head's query heads, head
// by head, as one double-buffered sequence. Dynamic shared memory: K and V tiles [128][D + 8], then
// two buffers of Q and dO tiles [kQ][D + 8] and of lse and D [kQ] (f32).
template <int D>
__global__ void __launch_bounds__(kBlockThreads, blocks_per_sm<Pass::key, D>())
    flash_attention_backward_mma_key_kernel(const bf16* qkv, const float* lse, const bf16* dout,
                                            const float* delta, bf16* dqkv, QkvHeads x, float scale,
                                            float scale_log2) {
  constexpr int P = pitch<D>(), kQ = key_kernel_queries<D>(), kN = kQ / 8;
  const int64_t T = x.T, W = x.width();
  GLASS_DYNAMIC_SHARED(bf16, shared);
  bf16* Ks = shared;
  bf16* Vs = Ks + kBlockRows * P;
  // buffer i (no arrays of pointers: see forward): Q, dO, then after both buffers lse and D
  auto Qs = [&](int i) { return Vs + kBlockRows * P + 2 * i * kQ * P; };
  auto dOs = [&](int i) { return Vs + kBlockRows * P + (2 * i + 1) * kQ * P; };
  float* stats = reinterpret_cast<float*>(Vs + kBlockRows * P + 4 * kQ * P);
  auto lse_s = [&](int i) { return stats + i * kQ; };
  auto delta_s = [&](int i) { return stats + (2 + i) * kQ; };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = mma::lane_group(lane), t = mma::lane_thread(lane);
  const int64_t first_slice = blockIdx.y * x.group();  // the key/value head's first query head
  const int64_t end_slice = first_slice + x.group();
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const int w0 = warp * kWarpRows;
  const int64_t first_key = k0 + w0;  // the warp's keys: first_key .. first_key + 15
  // query tile q0 of query head `slice` into buffer `buf`: Q and dO asynchronously; lse (log2
  // units; +inf past T, so P = 0 there) and D by plain stores, visible after the barrier that
  // follows the tile's wait
  auto load_query_tile = [&](int64_t slice, int64_t q0, int buf) {
    load_tile_async<D>(Qs(buf), qkv + x.q_at(slice), W, q0, T, kQ);
    load_tile_async<D>(dOs(buf), dout + x.out_at(slice), x.out_width(), q0, T, kQ);
    for (int r = threadIdx.x; r < kQ; r += blockDim.x) {
      const int64_t i = q0 + r;
      lse_s(buf)[r] = i < T ? lse[slice * T + i] * kLog2e : INFINITY;
      delta_s(buf)[r] = i < T ? delta[slice * T + i] : 0.0f;
    }
  };
  // 1. K, V and the first query head's query tile k0 (the first that sees this key tile)
  load_tile_async<D>(Ks, qkv + x.k_at(first_slice), W, k0, T, kBlockRows);
  load_tile_async<D>(Vs, qkv + x.v_at(first_slice), W, k0, T, kBlockRows);
  load_query_tile(first_slice, k0, 0);
  tc::cp_async_commit();
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  // the query heads in order, each from query tile k0 to the last: (slice, q0) now, (next_slice,
  // next_q0) queued behind it
  for (int64_t slice = first_slice, q0 = k0, it = 0; slice < end_slice; ++it) {
    const int buf = it % 2;
    const bool head_done = q0 + kQ >= T;
    const int64_t next_slice = head_done ? slice + 1 : slice, next_q0 = head_done ? k0 : q0 + kQ;
    if (next_slice < end_slice) load_query_tile(next_slice, next_q0, 1 - buf);
    tc::cp_async_commit();
    tc::cp_async_wait<1>();
    __syncthreads();
    // The warp's first key against the tile's first query: a warp whose keys all lie after the
    // tile (behind >= kQ) skips it, P^T = 0 there, but keeps to the barriers; the mask is needed
    // where the warp's last key passes the tile's first query (behind > -16: the diagonal).
    const int64_t behind = first_key - q0;
    if (behind < kQ) {
      const bool diagonal = behind > -kWarpRows;
      const int b = diagonal ? static_cast<int>(behind) : 0;
      // 2. S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys x kQ queries
      float s[kN][4] = {}, dp[kN][4] = {};
      mma_rows_dot_rows<D>(s, Ks, w0, Qs(buf), lane);
      mma_rows_dot_rows<D>(dp, Vs, w0, dOs(buf), lane);
      // 3. P^T = exp2(S^T scale log2(e) - lse2_i), 0 where key j > query i; dS^T = P^T (dP^T -
      //    D_i) into dp
      for (int n = 0; n < kN; ++n)
        for (int e = 0; e < 4; ++e) {
          const int c = 8 * n + 2 * t + e % 2;  // query q0 + c; key first_key + g + 8 (e / 2)
          const bool masked = diagonal && b + g + 8 * (e / 2) > c;
          const float p = masked ? 0.0f : exp2f(s[n][e] * scale_log2 - lse_s(buf)[c]);
          s[n][e] = p;
          dp[n][e] = p * (dp[n][e] - delta_s(buf)[c]);
        }
      // 4. dV += P^T dO and dK += dS^T Q (dO and Q read as [query][dim]: ldmatrix .trans)
      mma_probs_times_tile<D>(dv, s, dOs(buf), lane);
      mma_probs_times_tile<D>(dk, dp, Qs(buf), lane);
    }
    __syncthreads();
    slice = next_slice;
    q0 = next_q0;
  }
  tc::cp_async_wait<0>();
  // 5. dK = dk * scale and dV = dv into the k and v columns of dqkv, staged through the warp's own
  //    rows of Ks and Vs (only this warp ever read them)
  stage_accumulators<D>(Ks, w0, dk, scale, scale, lane);
  stage_accumulators<D>(Vs, w0, dv, 1.0f, 1.0f, lane);
  __syncwarp();
  store_rows<D>(dqkv + x.k_at(first_slice), W, first_key, T, Ks, w0, lane);
  store_rows<D>(dqkv + x.v_at(first_slice), W, first_key, T, Vs, w0, lane);
}

// ---------------------------------------------------------------------------------------------
// Host side.

size_t tile_bytes(int64_t rows, int64_t D) { return static_cast<size_t>(rows * (D + 8) * 2); }

// The checks, geometry, FLOPs and bytes of the launches above.
struct MmaGeometry : FlashAttentionShape {
  MmaGeometry(const char* kernel, const Tensor& qkv, int64_t n_head, int64_t n_kv_head,
              std::initializer_list<const Tensor*> like_qkv,
              std::initializer_list<const Tensor*> like_out, const Tensor& lse)
      : FlashAttentionShape(kernel, qkv, n_head, n_kv_head, like_qkv, like_out, lse) {
    GLASS_CHECK(qkv.dtype() == DType::bf16,
                "{}: qkv {} is {}; the Tensor Core flash kernel takes bf16 only (f32: "
                "--attention flash-simt)",
                kernel, qkv.describe(), dtype_name(qkv.dtype()));
    GLASS_CHECK(flash_mma_head_dim_ok(D),
                "{}: head dim D = C / n_head = {} / {} = {} is not supported: the Tensor Core "
                "flash kernel takes 32, 64 or 128",
                kernel, C, n_head, D);
    GLASS_CHECK(slices() <= 65535, "{}: B * n_head = {} exceeds the grid's 65535 in y", kernel,
                slices());
    for (const Tensor* t : {&qkv}) check_aligned(kernel, *t);
    for (const Tensor* t : like_qkv) check_aligned(kernel, *t);
    for (const Tensor* t : like_out) check_aligned(kernel, *t);
  }
  static void check_aligned(const char* kernel, const Tensor& t) {
    GLASS_CHECK(reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0,
                "{}: {} must start 16-byte aligned (cp.async and 16-byte stores)", kernel,
                t.describe());
  }
  // tiles of `rows` rows, times the slices (query kernels) or the key/value slices (key kernel)
  dim3 grid(int rows, bool per_kv_head = false) const {
    return dim3(ceil_div(T, rows), static_cast<unsigned>(per_kv_head ? kv_slices() : slices()));
  }
  // per slice, the K (or V) rows the forward / query kernel loads: query tile q0 (128 rows)
  // walks the 64-key tiles 0 .. last_key_tile (rows past T are zero-filled, not read)
  double key_rows_loaded() const {
    double rows = 0;
    for (int64_t q0 = 0; q0 < T; q0 += kBlockRows)
      rows += static_cast<double>(std::min(T, (last_key_tile(q0, T) + 1) * kKeyTile));
    return rows;
  }
  double query_rows_loaded() const {  // key kernel: key tile k0 (128 keys) loads queries k0..T
    double rows = 0;
    for (int64_t k0 = 0; k0 < T; k0 += kBlockRows) rows += static_cast<double>(T - k0);
    return rows;
  }
  double head_bytes(double rows) const {  // bf16 head rows over all (query) slices
    return static_cast<double>(slices()) * rows * static_cast<double>(D * 2);
  }
  double kv_head_bytes(double rows) const {  // bf16 head rows over the key/value slices
    return static_cast<double>(kv_slices()) * rows * static_cast<double>(D * 2);
  }
  double stats_bytes() const { return static_cast<double>(slices() * T) * sizeof(float); }
  LaunchInfo info(const char* name, const Tensor& on, dim3 grid, size_t shared, double flops,
                  double bytes) const {
    LaunchInfo li = kernel_launch_info(name, on, grid, dim3(kBlockThreads), shared, flops, bytes);
    li.unit = ComputeUnit::tensor_core_bf16;
    return li;
  }
};

// f(std::integral_constant<int, D>) for the supported head dims
template <class Fn>
void visit_head_dim(int64_t D, Fn&& fn) {
  switch (D) {
    case 32:
      return fn(std::integral_constant<int, 32>{});
    case 64:
      return fn(std::integral_constant<int, 64>{});
    case 128:
      return fn(std::integral_constant<int, 128>{});
  }
}

}  // namespace

void flash_attention_forward_mma(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                 int64_t n_head, int64_t n_kv_head, double scale) {
  const char* kernel = "flash_attention_forward_mma";
  const MmaGeometry g(kernel, qkv, n_head, n_kv_head, {}, {&out}, lse);
  if (qkv.numel() == 0) return;
  // FLOPs: kernels/costs/attention.h (S and P V on the Tensor Cores); bytes: Q read, O written
  // once, K and V once per query tile that sees them, lse written
  const size_t shared = 4 * tile_bytes(kKeyTile, g.D);  // holds Q's 128 rows first
  const LaunchInfo info = g.info(
      kernel, qkv, g.grid(kBlockRows), shared, flash_attention_forward_flops(g.slices(), g.T, g.D),
      g.head_bytes(2.0 * g.T + 2 * g.key_rows_loaded()) + g.stats_bytes());
  visit_head_dim(g.D, [&](auto d) {
    constexpr int D = decltype(d)::value;
    allow_dynamic_shared_memory(flash_attention_forward_mma_kernel<D>, kernel, shared,
                                qkv.device());
    launch_cuda_kernel(info, flash_attention_forward_mma_kernel<D>, qkv.data<bf16>(),
                       out.data<bf16>(), lse.data<float>(), QkvHeads::of(g),
                       static_cast<float>(scale) * kLog2e);
  });
}

void flash_attention_backward_mma(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                  const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                                  int64_t n_kv_head, double scale) {
  const char* kernel = "flash_attention_backward_mma";
  const MmaGeometry g(kernel, qkv, n_head, n_kv_head, {&dqkv}, {&out, &dout}, lse);
  if (qkv.numel() == 0) return;
  const Tensor delta = Tensor::empty(lse.shape(), DType::f32, qkv.device());  // D = rowsum(dO∘O)
  const float scale_f = static_cast<float>(scale), scale_log2 = scale_f * kLog2e;
  // 1. D, then dQ (kernels/costs/attention.h). Bytes: Q, dO, O read and dQ written once, K and V
  //    once per query tile that sees them, lse read and D written.
  const size_t query_shared = 2 * tile_bytes(kBlockRows, g.D) + 4 * tile_bytes(kKeyTile, g.D);
  const LaunchInfo query_info =
      g.info("flash_attention_backward_mma_query", qkv, g.grid(kBlockRows), query_shared,
             flash_attention_backward_query_flops(g.slices(), g.T, g.D),
             g.head_bytes(4.0 * g.T + 2 * g.key_rows_loaded()) + 2 * g.stats_bytes());
  // 2. dK and dV (kernels/costs/attention.h). Bytes: K, V read and dK, dV written once per
  //    key/value slice; Q, dO, lse and D of each of its query heads once per key tile that sees
  //    them.
  const LaunchInfo key_info =
      g.info("flash_attention_backward_mma_key", qkv, g.grid(kBlockRows, true), 0,
             flash_attention_backward_key_flops(g.slices(), g.T, g.D),
             g.kv_head_bytes(4.0 * g.T) + g.head_bytes(2 * g.query_rows_loaded()) +
                 2 * static_cast<double>(g.slices()) * g.query_rows_loaded() * sizeof(float));
  visit_head_dim(g.D, [&](auto d) {
    constexpr int D = decltype(d)::value;
    allow_dynamic_shared_memory(flash_attention_backward_mma_query_kernel<D>, kernel, query_shared,
                                qkv.device());
    launch_cuda_kernel(query_info, flash_attention_backward_mma_query_kernel<D>, qkv.data<bf16>(),
                       out.data<bf16>(), lse.data<float>(), dout.data<bf16>(), delta.data<float>(),
                       dqkv.data<bf16>(), QkvHeads::of(g), scale_f, scale_log2);
    constexpr int kQ = key_kernel_queries<D>();
    LaunchInfo info = key_info;
    info.shared_bytes =
        2 * tile_bytes(kBlockRows, D) + 4 * tile_bytes(kQ, D) + 4 * kQ * sizeof(float);
    allow_dynamic_shared_memory(flash_attention_backward_mma_key_kernel<D>, kernel,
                                info.shared_bytes, qkv.device());
    launch_cuda_kernel(info, flash_attention_backward_mma_key_kernel<D>, qkv.data<bf16>(),
                       lse.data<float>(), dout.data<bf16>(), delta.data<float>(), dqkv.data<bf16>(),
                       QkvHeads::of(g), scale_f, scale_log2);
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
