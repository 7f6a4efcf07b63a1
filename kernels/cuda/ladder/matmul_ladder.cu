// The matmul ladder: C = A B in f32, from naive to fast (docs/kernel_ladders.md):
//   rung 0  naive             matmul_naive               here
//   rung 1  shared-mem tiled  matmul_smem_tiled          here
//   rung 2  register tiled    matmul_register_tiled      here
//   rung 3  cuBLAS            cublasSgemmStridedBatched  the production path, kernels/cuda/gemm.cu
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
// each value read from shared memory 4 times more.
#include <algorithm>

#include "kernels/cuda/common.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/ladder/ladder_kernels.h"

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

// Checks g as gemm() and cuBLAS do, then launches `fn` over C in tiles of tile_m x tile_n outputs
// (grid x: column tiles, y: row tiles, z: batch entries) with `block` threads each.
void launch_matmul(const char* kernel, void (*fn)(Problem), const GemmArgs& g, dim3 block,
                   int64_t tile_m, int64_t tile_n) {
  check_gemm_args(g);
  GLASS_CHECK(g.c.dtype() == DType::f32,
              "{}: the matmul ladder's rungs are f32 and C is {} (bf16 runs on the production "
              "rung, cuBLAS)",
              kernel, g.c.describe());
  check_leading_dimensions(kernel, g);
  if (g.m == 0 || g.n == 0) return;
  const int64_t row_tiles = (g.m + tile_m - 1) / tile_m;
  GLASS_CHECK(row_tiles <= kMaxGridYZ && g.batch <= kMaxGridYZ,
              "{}: m = {} and batch = {} need a grid of {} x {} blocks in y and z, more than "
              "{} each",
              kernel, g.m, g.batch, row_tiles, g.batch, kMaxGridYZ);
  const dim3 grid(ceil_div(g.n, tile_n), static_cast<unsigned>(row_tiles),
                  static_cast<unsigned>(g.batch));
  // FLOPs 2mnk per matrix; ideal bytes: each distinct input matrix once (a batch stride of 0
  // reuses one), C written (and read when beta != 0), the bias.
  const double batch = static_cast<double>(g.batch);
  const double a_elems = static_cast<double>(g.m * g.k) * (g.stride_a == 0 ? 1 : batch);
  const double b_elems = static_cast<double>(g.k * g.n) * (g.stride_b == 0 ? 1 : batch);
  const double c_elems = static_cast<double>(g.m * g.n) * batch * (g.beta != 0 ? 2 : 1);
  const double bias_elems = g.bias.defined() ? static_cast<double>(g.n) : 0;
  LaunchInfo info = kernel_launch_info(kernel, g.c, grid, block, 0,
                                       2.0 * static_cast<double>(g.m * g.n) * g.k * batch,
                                       4.0 * (a_elems + b_elems + c_elems + bias_elems));
  launch_cuda_kernel(info, fn, problem_of(g));
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

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
