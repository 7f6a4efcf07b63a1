// The attention ladder: causal attention forward, f32, read from qkv [B, T, (H + 2 Hkv) D] (3C for
// multi-head attention; grouped-query attention reads key/value head h / (H / Hkv) for query
// head h) and written to out [B, T, C] with lse [B, H, T] (the flash entries' contract,
// kernels/backend.h), from the
// textbook three passes to FlashAttention (docs/kernel_ladders.md). Every rung computes
//   S = Q K^T * scale (causal),  P = softmax rows of S,  lse_i = log sum_j exp(S_ij),  O = P V
// and they differ in what goes through global memory (HBM on a GPU) and how often:
//   rung 0  naive      three launches; S and then P, [B, H, T, T] f32, written and read back
//   rung 1  row-fused  scores + softmax in one launch per row (S stays in shared memory), P still
//                      written for the P V launch
//   rung 2  tiled      FlashAttention forward, simplest form: one thread per query row, K and V
//                      tiles in shared memory, online softmax; nothing T x T exists
//   rung 3  flash      production (kernels/cuda/flash_attention.cu): rung 2 with 8 threads per
//                      row sharing a row's scores and head dims (shuffles), 128-thread blocks
// The bytes each launch declares are its real traffic: the T x T matrices where they go through
// memory, and for the tiled rungs K and V once per query tile that reads them.
#include <algorithm>
#include <cmath>

#include "engine/emu/dynamic_shared.h"
#include "engine/error.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/ladder/ladder_kernels.h"
#include "kernels/cuda/qkv_heads.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kThreads = 256;   // rungs 0 and 1's blocks
constexpr int kTiledRows = 32;  // rung 2: query rows (one thread each) and key rows per tile
constexpr int kMaxHeadDim = kFlashMaxHeadDim;
constexpr size_t kSharedPerBlock = 48 * 1024;  // without opting in to more (sm_90)

// The head rows of slice s: q, k and v at h.q_at(s), h.k_at(s), h.v_at(s) in qkv, rows h.width()
// apart (kernels/cuda/qkv_heads.h: a query head reads its key/value head); out at h.out_at(s), rows
// h.out_width() apart.
using Heads = QkvHeads;

// Rung 0, kernel 1: one thread per entry (slice, i, j) of S: q_i . k_j * scale, -inf above the
// diagonal. Writes S [B*H, T, T]: T^2 floats per slice through memory.
__global__ void attention_scores_naive_kernel(const float* qkv, float* S, Heads h, float scale) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_slice = h.T * h.T;
  const int64_t slice = blockIdx.y, i = e / h.T, j = e % h.T;
  if (e >= per_slice) return;
  const float* q = qkv + h.q_at(slice) + i * h.width();
  const float* k = qkv + h.k_at(slice) + j * h.width();
  float s = 0;
  if (j <= i)
    for (int64_t d = 0; d < h.D; ++d) s += q[d] * k[d];
  S[slice * per_slice + e] = j <= i ? s * scale : -INFINITY;
}

// Rung 0, kernel 2: one thread per row: m = max_j S_ij, l = sum_j exp(S_ij - m), lse = m + log l,
// P_ij = exp(S_ij - m) / l, in place over S.
__global__ void attention_softmax_naive_kernel(float* S, float* lse, int64_t rows, int64_t T) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  float* s = S + row * T;
  const int64_t len = row % T + 1;  // causal: entries past the diagonal are -inf, P = 0 there
  float m = -INFINITY, l = 0;
  for (int64_t j = 0; j < len; ++j) m = fmaxf(m, s[j]);
  for (int64_t j = 0; j < len; ++j) l += expf(s[j] - m);
  for (int64_t j = 0; j < T; ++j) s[j] = j < len ? expf(s[j] - m) / l : 0.0f;
  lse[row] = m + logf(l);
}

// Rungs 0 and 1, last kernel: one thread per output (slice, i, d): O_i[d] = sum_{j <= i} P_ij
// v_j[d], P read back from memory.
__global__ void attention_pv_kernel(const float* P, const float* qkv, float* out, Heads h) {
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t slice = blockIdx.y, i = e / h.D, d = e % h.D;
  if (e >= h.T * h.D) return;
  const float* p = P + (slice * h.T + i) * h.T;
  const float* v = qkv + h.v_at(slice) + d;
  float acc = 0;
  for (int64_t j = 0; j <= i; ++j) acc += p[j] * v[j * h.width()];
  out[h.out_at(slice) + i * h.out_width() + d] = acc;
}

// Rung 1, kernel 1: one block per row (slice, i). q_i and the row of scores live in shared memory
// (D + T floats): S never goes to memory; the block max and sum are block reductions; P and lse
// are written once.
__global__ void attention_row_fused_kernel(const float* qkv, float* P, float* lse, Heads h,
                                           float scale) {
  GLASS_DYNAMIC_SHARED(float, shared);
  float* qi = shared;
  float* s = shared + h.D;
  const int64_t slice = blockIdx.y, i = blockIdx.x;
  const float* q = qkv + h.q_at(slice) + i * h.width();
  const float* k = qkv + h.k_at(slice);
  // 1. stage q_i
  for (int64_t d = threadIdx.x; d < h.D; d += blockDim.x) qi[d] = q[d];
  __syncthreads();
  // 2. scores of keys j <= i (threads over j) and their max
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    float dot = 0;
    for (int64_t d = 0; d < h.D; ++d) dot += qi[d] * k[j * h.width() + d];
    s[j] = dot * scale;
    m = fmaxf(m, s[j]);
  }
  m = block_reduce(m, Max{});
  // 3. the sum of exp(S_ij - m), lse, and the row of P written once (zeros past the diagonal)
  float l = 0;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) l += expf(s[j] - m);
  l = block_reduce(l, Sum{});
  float* p = P + (slice * h.T + i) * h.T;
  for (int64_t j = threadIdx.x; j < h.T; j += blockDim.x) p[j] = j <= i ? expf(s[j] - m) / l : 0.0f;
  if (threadIdx.x == 0) lse[slice * h.T + i] = m + logf(l);
}

// Rung 2: FlashAttention forward in its simplest form. One block of kTiledRows threads per
// (query tile, slice), one thread per query row, holding q_i, its running max m, sum l and output
// accumulator in registers. For each key tile up to the diagonal, K and V tiles are staged in
// shared memory (each element read from memory once per query tile, not once per query row), then
// every thread runs the online softmax over the tile's keys: m_new = max(m, S_ij), and what was
// summed so far is rescaled by exp(m - m_new). Nothing T x T is stored anywhere.
__global__ void attention_forward_tiled_kernel(const float* qkv, float* out, float* lse, Heads h,
                                               float scale) {
  GLASS_DYNAMIC_SHARED(float, shared);
  float* Ks = shared;
  float* Vs = shared + kTiledRows * h.D;
  const int64_t slice = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kTiledRows;
  const int64_t i = q0 + threadIdx.x;
  const int D = static_cast<int>(h.D);
  const float* k = qkv + h.k_at(slice);
  const float* v = qkv + h.v_at(slice);
  float q[kMaxHeadDim], acc[kMaxHeadDim];
  for (int d = 0; d < D; ++d) {
    q[d] = i < h.T ? qkv[h.q_at(slice) + i * h.width() + d] : 0.0f;
    acc[d] = 0;
  }
  float m = -INFINITY, l = 0;
  for (int64_t k0 = 0; k0 <= q0; k0 += kTiledRows) {
    __syncthreads();  // the previous tile has been read
    // 1. stage the K and V tiles (rows past T as 0), consecutive threads on consecutive dims
    for (int idx = threadIdx.x; idx < kTiledRows * D; idx += kTiledRows) {
      const int64_t j = k0 + idx / D;
      Ks[idx] = j < h.T ? k[j * h.width() + idx % D] : 0.0f;
      Vs[idx] = j < h.T ? v[j * h.width() + idx % D] : 0.0f;
    }
    __syncthreads();
    // 2. online softmax over the tile's keys j <= i, one key at a time
    for (int c = 0; c < kTiledRows && k0 + c <= i; ++c) {
      float s = 0;
      for (int d = 0; d < D; ++d) s += q[d] * Ks[c * D + d];
      s *= scale;
      const float m_new = fmaxf(m, s);
      const float rescale = expf(m - m_new), p = expf(s - m_new);
      l = l * rescale + p;
      for (int d = 0; d < D; ++d) acc[d] = acc[d] * rescale + p * Vs[c * D + d];
      m = m_new;
    }
  }
  if (i >= h.T) return;
  // 3. O_i = acc / l written once, lse_i = m + log l
  for (int d = 0; d < D; ++d) out[h.out_at(slice) + i * h.out_width() + d] = acc[d] / l;
  lse[slice * h.T + i] = m + logf(l);
}

// ---------------------------------------------------------------------------------------------
// Host side.

struct RungShape : FlashAttentionShape {
  RungShape(const char* kernel, const Tensor& qkv, const Tensor& out, const Tensor& lse,
            int64_t n_head, int64_t n_kv_head)
      : FlashAttentionShape(kernel, require_f32(kernel, qkv), n_head, n_kv_head, {}, {&out}, lse) {
    GLASS_CHECK(flash_head_dim_ok(D), "{}: head dim {} must be a multiple of 8 in {}..{}", kernel,
                D, kFlashMinHeadDim, kFlashMaxHeadDim);
    GLASS_CHECK(slices() <= 65535, "{}: B * n_head = {} exceeds the grid's 65535 in y", kernel,
                slices());
  }
  Heads heads() const { return QkvHeads::of(*this); }
  double entries() const { return static_cast<double>(slices()) * (T * (T + 1) / 2); }
  double square_bytes() const { return static_cast<double>(slices() * T * T) * sizeof(float); }
  double head_bytes(double rows) const { return static_cast<double>(slices()) * rows * D * 4.0; }
  double lse_bytes() const { return static_cast<double>(slices() * T) * sizeof(float); }
};

// The P V launch of rungs 0 and 1: P [slices, T, T] read, V read, O written.
void launch_pv(const RungShape& g, const Tensor& P, const Tensor& qkv, const Tensor& out) {
  const LaunchInfo info = kernel_launch_info(
      "attention_pv", qkv, dim3(ceil_div(g.T * g.D, kThreads), static_cast<unsigned>(g.slices())),
      dim3(kThreads), 0, g.entries() * 2.0 * g.D, g.square_bytes() + g.head_bytes(2.0 * g.T));
  launch_cuda_kernel(info, attention_pv_kernel, P.data<float>(), qkv.data<float>(),
                     out.data<float>(), g.heads());
}

}  // namespace

void attention_forward_naive(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale) {
  const RungShape g("attention_forward_naive", qkv, out, lse, n_head, n_kv_head);
  if (qkv.numel() == 0) return;
  const Tensor S = Tensor::empty({g.slices(), g.T, g.T}, DType::f32, qkv.device());  // then P
  // 1. S: Q and K read, S written
  const LaunchInfo scores = kernel_launch_info(
      "attention_scores_naive", qkv,
      dim3(ceil_div(g.T * g.T, kThreads), static_cast<unsigned>(g.slices())), dim3(kThreads), 0,
      g.entries() * 2.0 * g.D, g.head_bytes(2.0 * g.T) + g.square_bytes());
  launch_cuda_kernel(scores, attention_scores_naive_kernel, qkv.data<float>(), S.data<float>(),
                     g.heads(), static_cast<float>(scale));
  // 2. softmax: S read, P written over it, lse written
  const LaunchInfo softmax = kernel_launch_info(
      "attention_softmax_naive", qkv, dim3(ceil_div(g.slices() * g.T, kThreads)), dim3(kThreads), 0,
      g.entries() * 5.0, 2 * g.square_bytes() + g.lse_bytes());
  launch_cuda_kernel(softmax, attention_softmax_naive_kernel, S.data<float>(), lse.data<float>(),
                     g.slices() * g.T, g.T);
  // 3. O = P V
  launch_pv(g, S, qkv, out);
}

void attention_forward_row_fused(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                 int64_t n_head, int64_t n_kv_head, double scale) {
  const char* kernel = "attention_row_fused";
  const RungShape g(kernel, qkv, out, lse, n_head, n_kv_head);
  if (qkv.numel() == 0) return;
  const size_t shared = static_cast<size_t>(g.D + g.T) * sizeof(float);
  GLASS_CHECK(shared <= kSharedPerBlock,
              "{}: a row of T = {} scores does not fit in a block's {} bytes of shared memory",
              kernel, g.T, kSharedPerBlock);
  const Tensor P = Tensor::empty({g.slices(), g.T, g.T}, DType::f32, qkv.device());
  // 1. per row: q_i and K read, P and lse written (S only in shared memory)
  const LaunchInfo info = kernel_launch_info(
      kernel, qkv, dim3(static_cast<unsigned>(g.T), static_cast<unsigned>(g.slices())),
      dim3(kThreads), shared, g.entries() * (2.0 * g.D + 5),
      g.head_bytes(2.0 * g.T) + g.square_bytes() + g.lse_bytes());
  launch_cuda_kernel(info, attention_row_fused_kernel, qkv.data<float>(), P.data<float>(),
                     lse.data<float>(), g.heads(), static_cast<float>(scale));
  // 2. O = P V
  launch_pv(g, P, qkv, out);
}

void attention_forward_tiled(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale) {
  const char* kernel = "attention_forward_tiled";
  const RungShape g(kernel, qkv, out, lse, n_head, n_kv_head);
  if (qkv.numel() == 0) return;
  // K and V rows loaded: query tile q0 reads keys 0..min(T, q0 + kTiledRows)
  double keys = 0;
  for (int64_t q0 = 0; q0 < g.T; q0 += kTiledRows)
    keys += static_cast<double>(std::min(g.T, q0 + kTiledRows));
  const LaunchInfo info = kernel_launch_info(
      kernel, qkv, dim3(ceil_div(g.T, kTiledRows), static_cast<unsigned>(g.slices())),
      dim3(kTiledRows), 2 * static_cast<size_t>(kTiledRows * g.D) * sizeof(float),
      g.entries() * (4.0 * g.D + 5), g.head_bytes(2.0 * g.T + 2 * keys) + g.lse_bytes());
  launch_cuda_kernel(info, attention_forward_tiled_kernel, qkv.data<float>(), out.data<float>(),
                     lse.data<float>(), g.heads(), static_cast<float>(scale));
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
