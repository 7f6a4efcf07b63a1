// The matmul ladder: C = A B, from naive to fast (docs/kernel_ladders.md):
//   rung 0  naive             matmul_naive               here, f32
//   rung 1  shared-mem tiled  matmul_smem_tiled          here, f32
//   rung 2  register tiled    matmul_register_tiled      here, f32
//   rung 3  cuBLAS            cublasSgemmStridedBatched  the production path, kernels/cuda/gemm.cu
//   rung 4  Tensor Cores      matmul_tensor_core_mma     here: bf16 in, f32 accumulate, mma.sync
// Each rung takes the whole GemmArgs contract of kernels/backend.h (row-major, op(A) m x k,
// op(B) k x n, transposes, leading dimensions, strided batches, alpha, beta, a bias over rows), so
// GLASS_KERNEL_VARIANT can put any rung under training. The arguments are checked as gemm()
// checks them (check_gemm_args); the bias and beta are an epilogue of each output:
//   C = alpha * acc + beta * C + bias    (C is not read when beta == 0, as in cuBLAS)
//
// What limits a GEMM is how often each loaded value is reused. Every output needs a row of A and
// a column of B: loaded straight from memory that is 2k loads for 2k FLOPs, one FLOP per 4 bytes,
// far below what a GPU can compute per byte of bandwidth. The rungs raise the reuse: a 16 x 16
// shared-memory tile reuses each loaded value 16 times; a 4 x 4 register tile per thread reuses
// each value read from shared memory 4 times more. Rung 4 moves the multiply-adds from the CUDA
// cores to the Tensor Cores (its own comment below).
#include <algorithm>
#include <cstdint>

#include "engine/emu/dynamic_shared.h"
#include "kernels/costs/gemm.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/ladder/ladder_kernels.h"
#include "kernels/cuda/tensor_core.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

// op(X) of one operand: element (row, col) of batch entry b, wherever the layout puts it.
struct Operand {
  const float* data;
  int64_t ld, batch_stride;
  bool trans;
  __device__ float at(int64_t b, int64_t row, int64_t col) const {
    const float* m = data + b * batch_stride;
    return trans ? m[col * ld + row] : m[row * ld + col];
  }
};

// GemmArgs as the kernels take them (one struct by value: kernel parameters live in constant
// memory on a GPU).
struct Problem {
  Operand a, b;
  float* c;
  const float* bias;  // null when there is none
  int64_t m, n, k, ldc, stride_c;
  float alpha, beta;

  // The epilogue: C[b][i][j] = alpha * acc + beta * C[b][i][j] + bias[j].
  __device__ void store(int64_t b, int64_t i, int64_t j, float acc) const {
    float* out = c + b * stride_c + i * ldc + j;
    float v = alpha * acc;
    if (beta != 0) v += beta * *out;
    if (bias) v += bias[j];
    *out = v;
  }
};

// Rung 0, naive. Mapping: one thread per output C[i][j]; blocks of 32 x 8 threads over C, with
// j = blockIdx.x * 32 + threadIdx.x and i = blockIdx.y * 8 + threadIdx.y, batch entry blockIdx.z.
// A warp is 32 neighbouring columns of one row: its loads of B and stores of C are coalesced and
// its load of A is one broadcast. Why it is slow: every output loads its 2k operands from global
// memory, and neighbouring threads load the same values again: no reuse beyond the cache.
constexpr int kNaiveX = 32, kNaiveY = 8;

__global__ void matmul_naive_kernel(Problem p) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kNaiveX + threadIdx.x;
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kNaiveY + threadIdx.y;
  const int64_t b = blockIdx.z;
  if (i >= p.m || j >= p.n) return;
  float acc = 0;
  for (int64_t q = 0; q < p.k; ++q) acc += p.a.at(b, i, q) * p.b.at(b, q, j);
  p.store(b, i, j, acc);
}

// Rung 1, shared-memory tiled. Mapping: a 16 x 16 block computes a 16 x 16 tile of C, one output
// per thread (threadIdx.x: column, threadIdx.y: row). What changed: the block walks k in steps of
// 16; at each step every thread loads one value of A's tile and one of B's into shared memory, and
// after a barrier each thread reads its row of the A tile and column of the B tile from there.
// Each value loaded from global memory now serves 16 outputs: 16x less global traffic. Values
// outside the matrices load as 0, so the edge tiles need no special case in the product loop.
constexpr int kTile = 16;

__global__ void matmul_smem_tiled_kernel(Problem p) {
  __shared__ float a_tile[kTile][kTile];
  __shared__ float b_tile[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  const int64_t i = static_cast<int64_t>(blockIdx.y) * kTile + ty;
  const int64_t b = blockIdx.z;
  float acc = 0;
  for (int64_t k0 = 0; k0 < p.k; k0 += kTile) {
    a_tile[ty][tx] = i < p.m && k0 + tx < p.k ? p.a.at(b, i, k0 + tx) : 0.0f;
    b_tile[ty][tx] = k0 + ty < p.k && j < p.n ? p.b.at(b, k0 + ty, j) : 0.0f;
    __syncthreads();  // the tiles are complete
    for (int q = 0; q < kTile; ++q) acc += a_tile[ty][q] * b_tile[q][tx];
    __syncthreads();  // everyone is done with the tiles before they are overwritten
  }
  if (i < p.m && j < p.n) p.store(b, i, j, acc);
}

// Rung 2, register tiled. Mapping: a block of 16 x 16 threads computes a 64 x 64 tile of C; thread
// (tx, ty) computes the 4 x 4 outputs in rows ty + 16 r and columns tx + 16 c (r, c < 4), so
// neighbouring threads own neighbouring columns: their shared-memory reads hit different banks and
// their stores to C are coalesced. What changed: per step of k, a thread reads 4 values of A and 4
// of B from shared memory into registers and does 16 multiply-adds with them (an outer product):
// 2 FLOPs per shared-memory read instead of 1/2 (x4 reuse), and the 16 accumulators stay in
// registers. The k tile is 16 deep; the block loads 64 x 16 values of A and 16 x 64 of B per step,
// 4 of each per thread, with consecutive threads on consecutive addresses of a row.
constexpr int kBlockMN = 64, kBlockK = 16, kThreadTile = 4, kThreadsXY = kBlockMN / kThreadTile;
constexpr int kRegisterThreads = kThreadsXY * kThreadsXY;

__global__ void matmul_register_tiled_kernel(Problem p) {
  __shared__ float a_tile[kBlockK][kBlockMN];  // transposed: a_tile[q][r] = A[row0 + r][k0 + q]
  __shared__ float b_tile[kBlockK][kBlockMN];  // b_tile[q][c] = B[k0 + q][col0 + c]
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kThreadsXY + tx;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kBlockMN;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kBlockMN;
  const int64_t b = blockIdx.z;
  float acc[kThreadTile][kThreadTile] = {};
  for (int64_t k0 = 0; k0 < p.k; k0 += kBlockK) {
    // 1. load the tiles, zeros outside the matrices
    for (int e = tid; e < kBlockMN * kBlockK; e += kRegisterThreads) {
      const int r = e / kBlockK, q = e % kBlockK;  // A: 16 threads along a row's k
      a_tile[q][r] = row0 + r < p.m && k0 + q < p.k ? p.a.at(b, row0 + r, k0 + q) : 0.0f;
      const int qb = e / kBlockMN, c = e % kBlockMN;  // B: 64 threads along a row's n
      b_tile[qb][c] = k0 + qb < p.k && col0 + c < p.n ? p.b.at(b, k0 + qb, col0 + c) : 0.0f;
    }
    __syncthreads();  // the tiles are complete
    // 2. one outer product of 4 values of A by 4 of B per q
    for (int q = 0; q < kBlockK; ++q) {
      float a_frag[kThreadTile], b_frag[kThreadTile];
      for (int r = 0; r < kThreadTile; ++r) a_frag[r] = a_tile[q][ty + kThreadsXY * r];
      for (int c = 0; c < kThreadTile; ++c) b_frag[c] = b_tile[q][tx + kThreadsXY * c];
      for (int r = 0; r < kThreadTile; ++r)
        for (int c = 0; c < kThreadTile; ++c) acc[r][c] += a_frag[r] * b_frag[c];
    }
    __syncthreads();  // everyone is done with the tiles before they are overwritten
  }
  for (int r = 0; r < kThreadTile; ++r)
    for (int c = 0; c < kThreadTile; ++c) {
      const int64_t i = row0 + ty + kThreadsXY * r, j = col0 + tx + kThreadsXY * c;
      if (i < p.m && j < p.n) p.store(b, i, j, acc[r][c]);
    }
}

// Rung 4, Tensor Cores: bf16 inputs, f32 accumulation, mma.sync (kernels/cuda/tensor_core.h).
//
// What changed: the multiply-adds leave the CUDA cores. One mma.sync.m16n8k16 is a warp-wide
// 16 x 8 x 16 product, 4096 FLOPs in one instruction, done by the Tensor Cores: an H200 does
// 989 TFLOP/s of dense bf16 there against 67 TFLOP/s of f32 FMA on the CUDA cores. Keeping them fed
// is the whole kernel:
//  - Mapping: a block of 8 warps (256 threads) computes a 128 x 128 tile of C; warp w owns the
//    64 x 32 sub-tile at rows 64 (w / 4), columns 32 (w % 4) of it: 4 x 4 mma tiles of 16 x 8, 64
//    f32 accumulators per thread (which lane holds which element: engine/emu/mma_fragments.h).
//  - k advances 32 at a time. cp.async copies the next 128 x 32 tiles of A and B from global to
//    shared memory while the warps multiply the current ones (double buffering: two stages, one
//    cp.async group per stage; wait_group 1 = every group but the newest has landed).
//  - ldmatrix loads a warp's fragments from shared memory: one x4 is a 16 x 16 block of A (mma's
//    a0..a3) or 16 k by 16 n of B (the b0, b1 of two 8-wide n tiles); .trans where the tile in
//    shared memory lies the other way round (A transposed, B not). Per 16 of k a warp issues 4 + 2
//    ldmatrix.x4 and 16 mma: each A fragment serves 4 mma, each B fragment 4.
// Arithmetic intensity: a 128 x 128 x 32 step moves 2 * 128 * 32 bf16 (16 KiB) into shared memory
// for 2 * 128 * 128 * 32 FLOPs, 64 FLOPs per byte from global memory (cuBLAS's bigger tiles and
// deeper pipelines reach more).
//
// Shared tiles: a tile whose k runs along its rows (A as stored, m x k; B transposed, stored n x k)
// is [128][32 + 8] bf16, one whose k runs down its columns (A transposed; B as stored, k x n) is
// [32][128 + 8]. The 8 elements of padding make ldmatrix conflict-free: the 8 lanes of one 8 x 8
// matrix address 8 rows of 16 bytes, and shared memory serves 32 banks of 4 bytes per cycle. Rows
// of 40 bf16 are 80 bytes = 20 banks apart: rows 0..7 start at banks 0, 20, 8, 28, 16, 4, 24, 12
// and cover 4 banks each, all 32 banks once (unpadded, 64-byte rows would put rows 0, 2, 4, 6 on
// the same 4 banks: a 4-way conflict). Rows of 136 bf16 are 272 bytes = 68 = 4 (mod 32) banks
// apart: banks 0, 4, ..., 28. Both row strides are multiples of 16 bytes, as cp.async and ldmatrix
// need.
//
// Edges: each 16-byte chunk (8 bf16) of a tile goes by cp.async when it lies wholly inside the
// matrix and its address is 16-byte aligned; by a zero-filling cp.async (src-size 0: nothing is
// read) when it lies wholly outside; by 8 scalar loads otherwise (the partial last chunk of a row
// when the row length is not a multiple of 8, or rows not 16-byte aligned: a leading dimension or
// batch stride not a multiple of 8). Zeros past k add nothing; rows and columns past m and n are
// computed and never stored. So every shape and layout is right, and aligned ones are fast.
//
// Operands: bf16 operands (mixed precision) go straight in and C is bf16, rounded once at the
// store. f32 operands are first rounded to bf16 by matmul_tensor_core_round_bf16 (a launch per
// operand into scratch with rows padded to a multiple of 8, so the copies are aligned) and C stays
// f32: the product of the rounded inputs, summed in f32. The tests compare it with the cpu GEMM of
// the same rounded inputs, so the tolerance stays that of f32 sums.
namespace tc = tensor_core;

constexpr int kTcBlockM = 128, kTcBlockN = 128, kTcBlockK = 32;
constexpr int kTcWarpsM = 2, kTcWarpsN = 4, kTcThreads = 32 * kTcWarpsM * kTcWarpsN;
constexpr int kTcWarpM = kTcBlockM / kTcWarpsM, kTcWarpN = kTcBlockN / kTcWarpsN;  // 64 x 32
constexpr int kTcTilesM = kTcWarpM / mma::kM, kTcTilesN = kTcWarpN / mma::kN;      // 4 x 4
constexpr int kChunk = 8;  // bf16 per 16-byte copy
constexpr int kTcPad = 8;  // bf16 of padding per shared row (the bank arithmetic above)

// A shared tile of 128 (m or n) by 32 (k), k along the rows when kKAlongRows, else 32 by 128.
template <bool kKAlongRows>
struct TcTile {
  static constexpr int rows = kKAlongRows ? kTcBlockM : kTcBlockK;
  static constexpr int cols = kKAlongRows ? kTcBlockK : kTcBlockM;
  static constexpr int stride = cols + kTcPad;
};
static_assert(kTcBlockM == kTcBlockN, "one tile shape serves A and B");
constexpr int kATileElems = TcTile<true>::rows * TcTile<true>::stride;    // 128 x 40
constexpr int kBTileElems = TcTile<false>::rows * TcTile<false>::stride;  // 32 x 136
constexpr int kTcStageElems = kATileElems > kBTileElems ? kATileElems : kBTileElems;
// dynamic shared memory: two stages of A, then two of B: 40 KiB, within the 48 KiB a block gets
// without opting in to more
constexpr size_t kTcSharedBytes = 4 * kTcStageElems * sizeof(uint16_t);

// GemmArgs with bf16 operands as the kernel takes them; T (float or bf16) is C's and the bias's.
template <class T>
struct TcProblem {
  const bf16* a;
  const bf16* b;
  T* c;
  const T* bias;  // null when there is none
  int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c;
  float alpha, beta;

  __device__ void store(int64_t batch, int64_t i, int64_t j, float acc) const {
    T* out = c + batch * stride_c + i * ldc + j;
    float v = alpha * acc;
    if (beta != 0) v += beta * to_compute(*out);
    if (bias) v += to_compute(bias[j]);
    *out = from_compute<T>(v);
  }
};

__device__ inline bool aligned_16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Issues the copies of one tile into shared `dst`: the Tile::rows x Tile::cols elements of the
// matrix at `src` (row stride ld) from (row0, col0), of which rows_left rows and cols_left
// columns lie inside the matrix. Thread tid copies chunks tid, tid + 256, ... (consecutive threads
// on consecutive 16 bytes of a row).
template <class Tile>
__device__ void tc_load_tile(uint16_t* dst, const bf16* src, int64_t ld, int64_t row0, int64_t col0,
                             int64_t rows_left, int64_t cols_left, int tid) {
  constexpr int kChunksPerRow = Tile::cols / kChunk;
  constexpr int kPerThread = Tile::rows * kChunksPerRow / kTcThreads;
  static_assert(Tile::rows * kChunksPerRow % kTcThreads == 0, "whole chunks per thread");
  GLASS_UNROLL
  for (int i = 0; i < kPerThread; ++i) {
    const int e = i * kTcThreads + tid;
    const int r = e / kChunksPerRow, c = e % kChunksPerRow * kChunk;
    uint16_t* d = dst + r * Tile::stride + c;
    const int64_t inside = r < rows_left ? (cols_left - c < kChunk ? cols_left - c : kChunk) : 0;
    if (inside <= 0) {
      tc::cp_async_16(d, src, false);  // zero fill; src is not read
      continue;
    }
    const bf16* s = src + (row0 + r) * ld + col0 + c;
    if (inside == kChunk && aligned_16(s)) {
      tc::cp_async_16(d, s);
    } else {
      for (int q = 0; q < kChunk; ++q) d[q] = q < inside ? s[q].bits : uint16_t{0};
    }
  }
}

// mma's A registers for the 16 x 16 block at (m0, kk) of a shared A tile. kSwapRows addresses the
// block's two 8-row halves the wrong way round (the test that the comparison catches a layout
// error, tests/ladder).
template <bool kKAlongRows, bool kSwapRows>
__device__ void tc_load_a(uint32_t (&a)[4], const uint16_t* tile, int m0, int kk, int lane) {
  constexpr int kStride = TcTile<kKAlongRows>::stride;
  const int j = lane / 8, swap = kSwapRows ? 1 : 0;
  if constexpr (kKAlongRows) {
    // tile[m][k]; lane l gives row l % 16 of column block l / 16: matrices a0 (rows 0-7, k 0-7),
    // a1 (rows 8-15), a2 (k 8-15), a3 (both)
    const int row = (lane % 16) ^ (8 * swap);
    tc::ldmatrix_x4(a, tile + (m0 + row) * kStride + kk + 8 * (lane / 16));
  } else {
    // tile[k][m], delivered transposed: matrix j spans k 8 (j / 2).., m 8 (j % 2)..
    tc::ldmatrix_x4_trans(
        a, tile + (kk + lane % 8 + 8 * (j / 2)) * kStride + m0 + 8 * ((j % 2) ^ swap));
  }
}

// mma's B registers of the two 16 (k) x 8 (n) tiles at n0 and n0 + 8: b[0], b[1] and b[2], b[3].
template <bool kKAlongRows>
__device__ void tc_load_b(uint32_t (&b)[4], const uint16_t* tile, int n0, int kk, int lane) {
  constexpr int kStride = TcTile<kKAlongRows>::stride;
  const int j = lane / 8, r = lane % 8;
  if constexpr (kKAlongRows)  // tile[n][k]: matrix j spans n 8 (j / 2).., k 8 (j % 2)..
    tc::ldmatrix_x4(b, tile + (n0 + r + 8 * (j / 2)) * kStride + kk + 8 * (j % 2));
  else  // tile[k][n], delivered transposed: matrix j spans k 8 (j % 2).., n 8 (j / 2)..
    tc::ldmatrix_x4_trans(b, tile + (kk + r + 8 * (j % 2)) * kStride + n0 + 8 * (j / 2));
}

template <bool kTransA, bool kTransB, class T, bool kSwapRows>
__global__ void __launch_bounds__(kTcThreads) matmul_tensor_core_mma_kernel(TcProblem<T> p) {
  constexpr bool kAAlongRows = !kTransA, kBAlongRows = kTransB;  // where k runs in the stored rows
  using ATile = TcTile<kAAlongRows>;
  using BTile = TcTile<kBAlongRows>;
  // Dynamic shared memory: A's stages 0 and 1, then B's. Stage s's tiles are computed from s, not
  // looked up in an array of pointers (indexed at run time, that array would live in local memory).
  GLASS_DYNAMIC_SHARED(uint16_t, shared);
  auto a_tile = [&](int s) { return shared + s * kTcStageElems; };
  auto b_tile = [&](int s) { return shared + (2 + s) * kTcStageElems; };
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / kTcWarpsN * kTcWarpM, warp_n = warp % kTcWarpsN * kTcWarpN;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTcBlockM;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTcBlockN;
  const int64_t batch = blockIdx.z;
  const bf16* a = p.a + batch * p.stride_a;
  const bf16* b = p.b + batch * p.stride_b;

  // The copies of the k tile at k0 into stage s, as one cp.async group.
  auto load_stage = [&](int s, int64_t k0) {
    if (kAAlongRows)
      tc_load_tile<ATile>(a_tile(s), a, p.lda, row0, k0, p.m - row0, p.k - k0, tid);
    else
      tc_load_tile<ATile>(a_tile(s), a, p.lda, k0, row0, p.k - k0, p.m - row0, tid);
    if (kBAlongRows)
      tc_load_tile<BTile>(b_tile(s), b, p.ldb, col0, k0, p.n - col0, p.k - k0, tid);
    else
      tc_load_tile<BTile>(b_tile(s), b, p.ldb, k0, col0, p.k - k0, p.n - col0, tid);
    tc::cp_async_commit();
  };

  float acc[kTcTilesM][kTcTilesN][4] = {};
  const int64_t k_tiles = (p.k + kTcBlockK - 1) / kTcBlockK;
  if (k_tiles > 0) load_stage(0, 0);
  for (int64_t kt = 0; kt < k_tiles; ++kt) {
    const int s = static_cast<int>(kt % 2);
    if (kt + 1 < k_tiles)
      load_stage(s ^ 1, (kt + 1) * kTcBlockK);
    else
      tc::cp_async_commit();  // an empty group keeps "all but the newest" meaning stage s
    tc::cp_async_wait<1>();   // this thread's copies of stage s have landed
    __syncthreads();          // and everyone's
    GLASS_UNROLL
    for (int kk = 0; kk < kTcBlockK; kk += mma::kK) {
      uint32_t a_frag[kTcTilesM][4], b_frag[kTcTilesN][2];
      GLASS_UNROLL
      for (int mi = 0; mi < kTcTilesM; ++mi)
        tc_load_a<kAAlongRows, kSwapRows>(a_frag[mi], a_tile(s), warp_m + mma::kM * mi, kk, lane);
      GLASS_UNROLL
      for (int ni = 0; ni < kTcTilesN; ni += 2) {
        uint32_t pair[4];
        tc_load_b<kBAlongRows>(pair, b_tile(s), warp_n + mma::kN * ni, kk, lane);
        b_frag[ni][0] = pair[0];
        b_frag[ni][1] = pair[1];
        b_frag[ni + 1][0] = pair[2];
        b_frag[ni + 1][1] = pair[3];
      }
      GLASS_UNROLL
      for (int mi = 0; mi < kTcTilesM; ++mi) {
        GLASS_UNROLL
        for (int ni = 0; ni < kTcTilesN; ++ni)
          tc::mma_m16n8k16_bf16(acc[mi][ni], a_frag[mi], b_frag[ni], acc[mi][ni]);
      }
    }
    __syncthreads();  // everyone is done with stage s before the next step refills it
  }
  tc::cp_async_wait<0>();  // nothing may be in flight when the thread exits

  GLASS_UNROLL
  for (int mi = 0; mi < kTcTilesM; ++mi) {
    GLASS_UNROLL
    for (int ni = 0; ni < kTcTilesN; ++ni) {
      GLASS_UNROLL
      for (int e = 0; e < 4; ++e) {
        const mma::RowCol rc = mma::c_element(lane, e);
        const int64_t i = row0 + warp_m + mma::kM * mi + rc.row;
        const int64_t j = col0 + warp_n + mma::kN * ni + rc.col;
        if (i < p.m && j < p.n) p.store(batch, i, j, acc[mi][ni][e]);
      }
    }
  }
}

// f32 -> bf16 for rung 4's f32 operands: `copies` matrices of rows x cols (row stride ld, batch
// stride stride) into contiguous rows of out_ld (a multiple of 8) bf16, zeros past cols.
struct RoundArgs {
  const float* src;
  bf16* dst;
  int64_t rows, cols, ld, stride, out_ld, total;
};

__global__ void matmul_tensor_core_round_bf16_kernel(RoundArgs r) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= r.total) return;
  const int64_t col = e % r.out_ld, row = e / r.out_ld % r.rows, copy = e / (r.out_ld * r.rows);
  r.dst[e] = from_compute<bf16>(col < r.cols ? r.src[copy * r.stride + row * r.ld + col] : 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Host side.

constexpr int64_t kMaxGridYZ = 65535;

Problem problem_of(const GemmArgs& g) {
  return Problem{{g.a.data<float>(), g.lda, g.stride_a, g.trans_a},
                 {g.b.data<float>(), g.ldb, g.stride_b, g.trans_b},
                 g.c.data<float>(),
                 g.bias.defined() ? g.bias.data<float>() : nullptr,
                 g.m,
                 g.n,
                 g.k,
                 g.ldc,
                 g.stride_c,
                 static_cast<float>(g.alpha),
                 static_cast<float>(g.beta)};
}

// gemm() leaves the leading dimensions to cuBLAS, which refuses one shorter than its operand's
// rows as stored (or than 1); the hand-written rungs check it here.
void check_leading_dimensions(const char* kernel, const GemmArgs& g) {
  const int64_t a_cols = g.trans_a ? g.m : g.k, b_cols = g.trans_b ? g.k : g.n;
  GLASS_CHECK(g.lda >= std::max<int64_t>(a_cols, 1) && g.ldb >= std::max<int64_t>(b_cols, 1) &&
                  g.ldc >= std::max<int64_t>(g.n, 1),
              "{}: a leading dimension is shorter than its rows as stored: lda={} (rows of A: "
              "{}), ldb={} (rows of B: {}), ldc={} (rows of C: {})",
              kernel, g.lda, a_cols, g.ldb, b_cols, g.ldc, g.n);
}

// Checks g as gemm() and cuBLAS do, and that a grid of tile_m-row tiles and g.batch entries fits
// CUDA's grid limits in y and z.
void check_rung_args(const char* kernel, const GemmArgs& g, int64_t tile_m) {
  check_gemm_args(g);
  check_leading_dimensions(kernel, g);
  const int64_t row_tiles = (g.m + tile_m - 1) / tile_m;
  GLASS_CHECK(row_tiles <= kMaxGridYZ && g.batch <= kMaxGridYZ,
              "{}: m = {} and batch = {} need a grid of {} x {} blocks in y and z, more than "
              "{} each",
              kernel, g.m, g.batch, row_tiles, g.batch, kMaxGridYZ);
}

// Grid x: column tiles, y: row tiles, z: batch entries.
dim3 tile_grid(const GemmArgs& g, int64_t tile_m, int64_t tile_n) {
  return dim3(ceil_div(g.n, tile_n), ceil_div(g.m, tile_m), static_cast<unsigned>(g.batch));
}

// Ideal bytes: each distinct input matrix once (a batch stride of 0 reuses one) at `operand_bytes`
// per element, C written (and read when beta != 0) and the bias at `output_bytes`.
double ideal_bytes(const GemmArgs& g, double operand_bytes, double output_bytes) {
  const GemmElements e = gemm_elements(g);
  return operand_bytes * (e.a + e.b) + output_bytes * (e.c + e.bias);
}

// Checks g, then launches `fn` over C in tiles of tile_m x tile_n outputs with `block` threads
// each.
void launch_matmul(const char* kernel, void (*fn)(Problem), const GemmArgs& g, dim3 block,
                   int64_t tile_m, int64_t tile_n) {
  check_rung_args(kernel, g, tile_m);
  GLASS_CHECK(g.c.dtype() == DType::f32,
              "{}: the matmul ladder's rungs 0-2 are f32 and C is {} (bf16 runs on cuBLAS, rung "
              "3, and on the Tensor Core rung 4)",
              kernel, g.c.describe());
  if (g.m == 0 || g.n == 0) return;
  LaunchInfo info = kernel_launch_info(kernel, g.c, tile_grid(g, tile_m, tile_n), block, 0,
                                       gemm_flops(g), ideal_bytes(g, 4, 4));
  launch_cuda_kernel(info, fn, problem_of(g));
}

// An operand as rung 4 reads it: bf16 elements, row stride ld, batch stride.
struct Bf16Operand {
  Tensor storage;  // keeps a rounded copy alive until the launch has been issued
  const bf16* data;
  int64_t ld, stride;
};

// A bf16 operand as it is; an f32 one (stored rows x cols) rounded to bf16 into a contiguous
// scratch copy with rows of a multiple of 8 elements (one copy when the batch stride is 0).
Bf16Operand bf16_operand(const Tensor& x, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                         int64_t batch) {
  if (x.dtype() == DType::bf16) return {Tensor(), x.data<bf16>(), ld, stride};
  if (rows == 0 || cols == 0) return {Tensor(), nullptr, kChunk, 0};  // k = 0: nothing is read
  const int64_t copies = stride == 0 ? 1 : batch, out_ld = (cols + kChunk - 1) / kChunk * kChunk;
  const Tensor out = Tensor::empty({copies, rows, out_ld}, DType::bf16, x.device());
  const RoundArgs r{x.data<float>(), out.data<bf16>(),      rows, cols, ld, stride,
                    out_ld,          copies * rows * out_ld};
  if (r.total > 0) {
    constexpr unsigned kThreads = 256;
    LaunchInfo info = kernel_launch_info(
        "matmul_tensor_core_round_bf16", out, dim3(ceil_div(r.total, kThreads)), dim3(kThreads), 0,
        0, 4.0 * static_cast<double>(copies * rows * cols) + 2.0 * static_cast<double>(r.total));
    info.unit = ComputeUnit::memory;
    launch_cuda_kernel(info, matmul_tensor_core_round_bf16_kernel, r);
  }
  return {out, out.data<bf16>(), out_ld, stride == 0 ? 0 : rows * out_ld};
}

template <class T, bool kSwapRows>
void launch_tensor_core(const char* kernel, const GemmArgs& g) {
  check_rung_args(kernel, g, kTcBlockM);
  if (g.m == 0 || g.n == 0) return;
  // A is stored m x k (k x m transposed), B k x n (n x k transposed)
  const Bf16Operand a =
      bf16_operand(g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a, g.batch);
  const Bf16Operand b =
      bf16_operand(g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b, g.batch);
  const TcProblem<T> p{a.data,
                       b.data,
                       g.c.data<T>(),
                       g.bias.defined() ? g.bias.data<T>() : nullptr,
                       g.m,
                       g.n,
                       g.k,
                       a.ld,
                       b.ld,
                       g.ldc,
                       a.stride,
                       b.stride,
                       g.stride_c,
                       static_cast<float>(g.alpha),
                       static_cast<float>(g.beta)};
  void (*fn)(TcProblem<T>) = nullptr;
  if constexpr (kSwapRows) {
    GLASS_CHECK(!g.trans_a && !g.trans_b,
                "{}: the swapped-rows test kernel takes A and B untransposed", kernel);
    fn = matmul_tensor_core_mma_kernel<false, false, T, true>;
  } else if (g.trans_a) {
    fn = g.trans_b ? matmul_tensor_core_mma_kernel<true, true, T, false>
                   : matmul_tensor_core_mma_kernel<true, false, T, false>;
  } else {
    fn = g.trans_b ? matmul_tensor_core_mma_kernel<false, true, T, false>
                   : matmul_tensor_core_mma_kernel<false, false, T, false>;
  }
  LaunchInfo info = kernel_launch_info(kernel, g.c, tile_grid(g, kTcBlockM, kTcBlockN),
                                       dim3(kTcThreads), kTcSharedBytes, gemm_flops(g),
                                       ideal_bytes(g, 2, static_cast<double>(sizeof(T))));
  info.unit = ComputeUnit::tensor_core_bf16;
  launch_cuda_kernel(info, fn, p);
}

// Rung 4 for f32 or bf16 operands (gemm()'s contract: all of one dtype).
void matmul_tensor_core_of(const char* kernel, const GemmArgs& g) {
  check_gemm_args(g);  // every operand f32, or every one bf16, on one device
  if (g.c.dtype() == DType::bf16)
    launch_tensor_core<bf16, false>(kernel, g);
  else
    launch_tensor_core<float, false>(kernel, g);
}

}  // namespace

void matmul_naive(const GemmArgs& g) {
  launch_matmul("matmul_naive", matmul_naive_kernel, g, dim3(kNaiveX, kNaiveY), kNaiveY, kNaiveX);
}

void matmul_smem_tiled(const GemmArgs& g) {
  launch_matmul("matmul_smem_tiled", matmul_smem_tiled_kernel, g, dim3(kTile, kTile), kTile, kTile);
}

void matmul_register_tiled(const GemmArgs& g) {
  launch_matmul("matmul_register_tiled", matmul_register_tiled_kernel, g,
                dim3(kThreadsXY, kThreadsXY), kBlockMN, kBlockMN);
}

void matmul_tensor_core(const GemmArgs& g) { matmul_tensor_core_of("matmul_tensor_core_mma", g); }

void matmul_tensor_core_swapped_rows(const GemmArgs& g) {
  check_gemm_args(g);
  GLASS_CHECK(g.c.dtype() == DType::f32, "matmul_tensor_core_swapped_rows: f32 operands only");
  launch_tensor_core<float, true>("matmul_tensor_core_mma", g);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
