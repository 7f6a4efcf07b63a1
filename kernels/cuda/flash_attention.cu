// FlashAttention, forward and backward, written by hand: causal scaled-dot-product attention read
// straight from the fused qkv projection qkv [B, T, (H + 2 Hkv) D] (kernels/cuda/qkv_heads.h:
// query head h reads key/value head h / (H / Hkv); Hkv = H is multi-head attention, qkv
// [B, T, 3C]), written to out [B, T, C = H D], with lse f32 [B, H, T] the per-row log-sum-exp of
// the scaled, masked scores. Contracts in kernels/kernel_list.inc; the cpu entries are
// kernels/cpu/flash_attention.cpp.
//
//   S = Q K^T * scale, causal (S_ij for j > i is -inf);  P = softmax rows of S;  O = P V
//   lse_i = log sum_j exp(S_ij), so P_ij = exp(S_ij - lse_i)
//   backward: D_i = rowsum(dO_i * O_i) (= sum_j P_ij dP_ij);  dP = dO V^T;  dS = P * (dP - D)
//             dV = P^T dO;  dQ = dS K * scale;  dK = dS^T Q * scale
//   grouped: dK and dV of a key/value head sum those of its H / Hkv query heads
//
// Nothing of size T x T exists anywhere: every kernel walks tiles of query rows against tiles of
// kTile key rows, staged in shared memory, and keeps its T x T piece (a block of S, P or dS) in
// shared memory only while that tile pair is being used. The forward's query tiles have
// kForwardRows rows (K and V are read once per query tile, so a taller tile reads them less
// often), the backward's kTile.
// - forward, block (query tile, slice): for each key tile up to the diagonal, the scores of the
//   tile, then the online softmax (a running max m and sum l per row; when the max grows, the sum
//   and the output accumulated so far are rescaled by exp(m_old - m_new)), then O += P V. O is
//   divided by l and written once; lse = m + log l is saved for backward.
// - backward, kernel 1, block (query tile, slice): D_i = dO_i . O_i first (written to a scratch
//   [B, H, T] for kernel 2), then for each key tile up to the diagonal P is recomputed from Q, K
//   and lse, dP = dO V^T, dS = P (dP - D), and dQ += dS K. dQ is written once.
// - backward, kernel 2, block (key tile, key/value slice): for each query head of the key/value
//   head in order, for each query tile from the diagonal on, P and dS are recomputed the same way,
//   and dV += P^T dO, dK += dS^T Q. dK and dV are written once.
// Each output element is summed by one thread in a fixed order, so there are no atomics and the
// results are the same bits on every run.
//
// Threads: kLanes lanes per tile row (forward 32 x 8 = 256, backward 16 x 8 = 128). Row r belongs
// to the kLanes consecutive threads r*kLanes.. of one warp: they share the row's entries of S (lane
// c owns columns c and c + kLanes) and its head dims (lane c owns d = c, c + kLanes, ...); row max
// and sum are butterfly shuffles over those lanes. Shared memory stays within the 48 KB a block
// gets without opting in, for every head dim up to kFlashMaxHeadDim (largest: backward kernel 2 at
// D = 128, 35 KB; forward 35 KB).
//
// Bank conflicts: the [rows][D] f32 tiles have a row pitch of D + 1 floats (tile_pitch). A score
// dot product has the 8 lanes of a row read 8 different key rows (forward, query kernel) or query
// rows (key kernel) at the same head dim d: word c * pitch + d, bank (c * pitch + d) mod 32. With
// pitch D (a multiple of 8, and of 32 for the usual head dims) all 8 words sit in one bank: 8-way
// conflict, the dot products run at 1/8 of shared memory's rate. With pitch D + 1 the bank is
// (c * (D + 1) + d) mod 32 = (c * D + c + d) mod 32, for D a multiple of 32 just c + d: 8
// different banks (for D = 8 mod 32 and the like, c * (D + 1) mod 32 still differs for c = 0..7,
// D + 1 being odd). The P V and dS K loops read consecutive d from one row: consecutive banks
// with any pitch.
//
// Element types E: f32, and bf16 for mixed precision (qkv, out, dout, dqkv bf16; lse and the D
// scratch f32). Tiles, shared memory and every sum are f32 whatever E is: a bf16 element is
// widened once when its tile is loaded (exact) and each result is rounded to E once when it is
// stored. f32 tiles rather than bf16 ones because every tile element is read D or kTile times by
// the dot products of a tile pair, so converting on load takes the conversions out of the inner
// loops, and the same shared-memory layout (and the 48 KB budget above) serves both dtypes; bf16
// tiles would halve shared memory, which nothing here needs.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engine/emu/dynamic_shared.h"
#include "kernels/costs/attention.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/qkv_heads.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kTile = 16;                 // key rows of a tile, and the backward's query rows
constexpr int kForwardRows = 32;          // query rows of a forward tile
constexpr int kLanes = 8;                 // threads per tile row (inside one warp)
constexpr int kThreads = kTile * kLanes;  // a backward block
constexpr int kForwardThreads = kForwardRows * kLanes;  // a forward block
constexpr int kPerLane = kFlashMaxHeadDim / kLanes;     // head dims one lane owns, at most
constexpr int kPad = kTile + 1;  // row pitch of the S/P/dS tiles (no bank clash)

// Row pitch, in floats, of the [rows][D] tiles: D + 1 (header: the bank arithmetic).
__host__ __device__ constexpr int tile_pitch(int D) { return D + 1; }

// Rows row0..row0+rows-1 of one head (row stride `pitch` elements), as an f32 tile [rows][D]
// of row pitch tile_pitch(D); rows at or past T read as 0. Consecutive threads read consecutive
// head dims (coalesced).
template <class E>
__device__ void load_tile(float* tile, const E* head, int64_t pitch, int64_t row0, int64_t T, int D,
                          int rows = kTile) {
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    tile[r * tile_pitch(D) + d] = row0 + r < T ? to_compute(head[(row0 + r) * pitch + d]) : 0.0f;
  }
}

// sum_d a[d] * b[d] over one head dim
__device__ inline float head_dot(const float* a, const float* b, int D) {
  float s = 0;
  for (int d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

// op over the kLanes lanes of this thread's tile row (butterfly: every lane gets the result, in
// a fixed order). Every thread of the warp must call it.
template <class Op>
__device__ float row_reduce(float value, Op op) {
  for (int mask = kLanes / 2; mask > 0; mask /= 2)
    value = op(value, __shfl_xor_sync(kFullMask, value, mask));
  return value;
}

// Forward. Grid (query tiles of kForwardRows, B*H). Dynamic shared memory: Q [kForwardRows][D],
// K and V [kTile][D], P [kForwardRows][kPad].
template <class E>
__global__ void flash_attention_forward_kernel(const E* qkv, E* out, float* lse, QkvHeads x,
                                               float scale) {
  const int64_t T = x.T, W = x.width();
  const int D = static_cast<int>(x.D);
  GLASS_DYNAMIC_SHARED(float, shared);
  float* Qs = shared;
  float* Ks = Qs + kForwardRows * tile_pitch(D);
  float* Vs = Ks + kTile * tile_pitch(D);
  float* Ps = Vs + kTile * tile_pitch(D);
  const int64_t slice = blockIdx.y;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kForwardRows;
  const int r = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t i = q0 + r;  // this thread's query row (rows past T compute but never store)
  const E* q = qkv + x.q_at(slice);
  const E* k = qkv + x.k_at(slice);
  const E* v = qkv + x.v_at(slice);
  // 1. the query tile, once
  load_tile(Qs, q, W, q0, T, D, kForwardRows);
  float m = -INFINITY, l = 0;  // running max and sum of exp(S_ij - m) of row i
  float acc[kPerLane] = {};    // running sum_j exp(S_ij - m) V_j[d], d = lane + kLanes * n
  // Key tiles up to the tile's last row: beyond it every key is masked. A row above a tile's
  // first key finds all of it masked: its max and sums are unchanged (exp(-inf) = 0).
  for (int64_t k0 = 0; k0 < q0 + kForwardRows && k0 < T; k0 += kTile) {
    __syncthreads();  // the previous tile's K, V and P have been read
    // 2. the key and value tiles
    load_tile(Ks, k, W, k0, T, D);
    load_tile(Vs, v, W, k0, T, D);
    __syncthreads();
    // 3. S_ij = q_i . k_j * scale for this lane's two keys; -inf where masked (j > i or j >= T)
    float s[2];
    for (int half = 0; half < 2; ++half) {
      const int c = lane + half * kLanes;
      const int64_t j = k0 + c;
      s[half] = j <= i && j < T
                    ? head_dot(Qs + r * tile_pitch(D), Ks + c * tile_pitch(D), D) * scale
                    : -INFINITY;
    }
    // 4. online softmax: the new running max (finite: key 0 of the first tile is never masked),
    //    the tile's exp(S - m_new), and the factor exp(m_old - m_new) that rescales what came
    //    before
    const float m_new = fmaxf(m, row_reduce(fmaxf(s[0], s[1]), Max{}));
    const float p0 = expf(s[0] - m_new), p1 = expf(s[1] - m_new);
    const float rescale = expf(m - m_new);  // 0 on the first tile (m = -inf)
    l = l * rescale + row_reduce(p0 + p1, Sum{});
    m = m_new;
    Ps[r * kPad + lane] = p0;
    Ps[r * kPad + lane + kLanes] = p1;
    __syncwarp();  // the row's P is written and read by the row's own lanes
    // 5. acc = acc * rescale + P_i V over the tile's keys, for this lane's head dims
    for (int n = 0; n < kPerLane; ++n) {
      const int d = lane + n * kLanes;
      if (d >= D) break;
      float pv = 0;
      for (int c = 0; c < kTile; ++c) pv += Ps[r * kPad + c] * Vs[c * tile_pitch(D) + d];
      acc[n] = acc[n] * rescale + pv;
    }
  }
  if (i >= T) return;
  // 6. O_i = acc / l, written once; lse_i = m + log l
  E* o = out + x.out_at(slice) + i * x.out_width();
  for (int n = 0; n < kPerLane && lane + n * kLanes < D; ++n)
    o[lane + n * kLanes] = from_compute<E>(acc[n] / l);
  if (lane == 0) lse[slice * T + i] = m + logf(l);
}

// Backward kernel 1: D and dQ. Grid (query tiles, B*H). Dynamic shared memory: Q, dO, K, V tiles
// [kTile][D], dS [kTile][kPad]. Writes D (delta [B*H, T]) and the q columns of dqkv.
template <class E>
__global__ void flash_attention_backward_query_kernel(const E* qkv, const E* out, const float* lse,
                                                      const E* dout, float* delta, E* dqkv,
                                                      QkvHeads x, float scale) {
  const int64_t T = x.T, W = x.width(), C = x.out_width();
  const int D = static_cast<int>(x.D);
  GLASS_DYNAMIC_SHARED(float, shared);
  float* Qs = shared;
  float* dOs = Qs + kTile * tile_pitch(D);
  float* Ks = dOs + kTile * tile_pitch(D);
  float* Vs = Ks + kTile * tile_pitch(D);
  float* dSs = Vs + kTile * tile_pitch(D);
  const int64_t slice = blockIdx.y;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int r = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t i = q0 + r;
  const bool row_valid = i < T;
  const E* q = qkv + x.q_at(slice);
  const E* k = qkv + x.k_at(slice);
  const E* v = qkv + x.v_at(slice);
  // 1. the query and output-gradient tiles, once
  load_tile(Qs, q, W, q0, T, D);
  load_tile(dOs, dout + x.out_at(slice), C, q0, T, D);
  __syncthreads();
  // 2. D_i = dO_i . O_i, over this lane's head dims then the row's lanes; saved for kernel 2
  float part = 0;
  if (row_valid) {
    const E* o = out + x.out_at(slice) + i * C;
    for (int d = lane; d < D; d += kLanes) part += dOs[r * tile_pitch(D) + d] * to_compute(o[d]);
  }
  const float delta_i = row_reduce(part, Sum{});
  if (row_valid && lane == 0) delta[slice * T + i] = delta_i;
  const float lse_i = row_valid ? lse[slice * T + i] : 0.0f;
  float acc[kPerLane] = {};  // sum_j dS_ij K_j[d], d = lane + kLanes * n
  for (int64_t k0 = 0; k0 <= q0; k0 += kTile) {
    __syncthreads();  // the previous tile's K and dS have been read
    // 3. the key and value tiles
    load_tile(Ks, k, W, k0, T, D);
    load_tile(Vs, v, W, k0, T, D);
    __syncthreads();
    // 4. P_ij = exp(q_i . k_j * scale - lse_i) recomputed; dP_ij = dO_i . v_j;
    //    dS_ij = P_ij (dP_ij - D_i); 0 where masked
    for (int half = 0; half < 2; ++half) {
      const int c = lane + half * kLanes;
      const int64_t j = k0 + c;
      float ds = 0;
      if (row_valid && j <= i) {
        const float p =
            expf(head_dot(Qs + r * tile_pitch(D), Ks + c * tile_pitch(D), D) * scale - lse_i);
        ds = p * (head_dot(dOs + r * tile_pitch(D), Vs + c * tile_pitch(D), D) - delta_i);
      }
      dSs[r * kPad + c] = ds;
    }
    __syncwarp();  // the row's dS is written and read by the row's own lanes
    // 5. acc += dS_i K over the tile's keys
    for (int n = 0; n < kPerLane; ++n) {
      const int d = lane + n * kLanes;
      if (d >= D) break;
      float sum = 0;
      for (int c = 0; c < kTile; ++c) sum += dSs[r * kPad + c] * Ks[c * tile_pitch(D) + d];
      acc[n] += sum;
    }
  }
  if (!row_valid) return;
  // 6. dQ_i = acc * scale, written once into the q columns of dqkv
  E* dq = dqkv + x.q_at(slice) + i * W;
  for (int n = 0; n < kPerLane && lane + n * kLanes < D; ++n)
    dq[lane + n * kLanes] = from_compute<E>(acc[n] * scale);
}

// Backward kernel 2: dK and dV. Grid (key tiles, B*Hkv). Thread (c, lane) owns key j = k0 + c; the
// block sums over the query heads of its key/value head, in order.
// Dynamic shared memory: K, V, Q, dO tiles [kTile][D], P and dS [kTile][kPad] (query row, key),
// lse and D of the query tile [kTile] each.
template <class E>
__global__ void flash_attention_backward_key_kernel(const E* qkv, const float* lse, const E* dout,
                                                    const float* delta, E* dqkv, QkvHeads x,
                                                    float scale) {
  const int64_t T = x.T, W = x.width();
  const int D = static_cast<int>(x.D);
  GLASS_DYNAMIC_SHARED(float, shared);
  float* Ks = shared;
  float* Vs = Ks + kTile * tile_pitch(D);
  float* Qs = Vs + kTile * tile_pitch(D);
  float* dOs = Qs + kTile * tile_pitch(D);
  float* Ps = dOs + kTile * tile_pitch(D);
  float* dSs = Ps + kTile * kPad;
  float* lse_s = dSs + kTile * kPad;
  float* delta_s = lse_s + kTile;
  const int64_t first_slice = blockIdx.y * x.group();  // the key/value head's first query head
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int c = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int64_t j = k0 + c;
  // 1. the key and value tiles, once
  load_tile(Ks, qkv + x.k_at(first_slice), W, k0, T, D);
  load_tile(Vs, qkv + x.v_at(first_slice), W, k0, T, D);
  float dk[kPerLane] = {}, dv[kPerLane] = {};  // sums over i of dS_ij Q_i[d] and P_ij dO_i[d]
  // The query heads in order; for each, the query tiles from the diagonal on: earlier queries
  // see none of these keys.
  for (int64_t slice = first_slice; slice < first_slice + x.group(); ++slice)
    for (int64_t q0 = k0; q0 < T; q0 += kTile) {
      __syncthreads();  // the previous tile's Q, dO, P and dS have been read
      // 2. the query and output-gradient tiles with their lse and D
      load_tile(Qs, qkv + x.q_at(slice), W, q0, T, D);
      load_tile(dOs, dout + x.out_at(slice), x.out_width(), q0, T, D);
      if (threadIdx.x < kTile) {
        const int64_t i = q0 + threadIdx.x;
        lse_s[threadIdx.x] = i < T ? lse[slice * T + i] : 0.0f;
        delta_s[threadIdx.x] = i < T ? delta[slice * T + i] : 0.0f;
      }
      __syncthreads();
      // 3. P_ij and dS_ij = P_ij (dO_i . v_j - D_i) for this lane's two query rows; 0 where masked
      for (int half = 0; half < 2; ++half) {
        const int r = lane + half * kLanes;
        const int64_t i = q0 + r;
        float p = 0, ds = 0;
        if (i < T && j <= i) {
          p = expf(head_dot(Qs + r * tile_pitch(D), Ks + c * tile_pitch(D), D) * scale - lse_s[r]);
          ds = p * (head_dot(dOs + r * tile_pitch(D), Vs + c * tile_pitch(D), D) - delta_s[r]);
        }
        Ps[r * kPad + c] = p;
        dSs[r * kPad + c] = ds;
      }
      __syncwarp();  // the key's column of P and dS is written and read by the key's own lanes
      // 4. dV_j += sum_i P_ij dO_i;  dK_j += sum_i dS_ij Q_i, over the tile's queries in order. The
      //    inner loop over this lane's head dims runs its full compile-time count with the dims
      //    past D skipped inside (no `break` on the run-time D): ptxas unrolls it and keeps dk and
      //    dv in registers (indexed at run time they would live in local memory).
      for (int r = 0; r < kTile; ++r) {
        const float p = Ps[r * kPad + c], ds = dSs[r * kPad + c];
        const float* dO_r = dOs + r * tile_pitch(D);
        const float* Q_r = Qs + r * tile_pitch(D);
        for (int n = 0; n < kPerLane; ++n) {
          const int d = lane + n * kLanes;
          if (d < D) {
            dv[n] += p * dO_r[d];
            dk[n] += ds * Q_r[d];
          }
        }
      }
    }
  if (j >= T) return;
  // 5. dK_j = dk * scale and dV_j = dv, written once into the k and v columns of dqkv
  E* dk_j = dqkv + x.k_at(first_slice) + j * W;
  E* dv_j = dqkv + x.v_at(first_slice) + j * W;
  for (int n = 0; n < kPerLane; ++n) {
    const int d = lane + n * kLanes;
    if (d < D) {
      dk_j[d] = from_compute<E>(dk[n] * scale);
      dv_j[d] = from_compute<E>(dv[n]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

// The launch geometry, FLOPs and bytes of the kernels above, on top of the shared checks.
struct FlashGeometry : FlashAttentionShape {
  FlashGeometry(const char* kernel, const Tensor& qkv, int64_t n_head, int64_t n_kv_head,
                std::initializer_list<const Tensor*> like_qkv,
                std::initializer_list<const Tensor*> like_out, const Tensor& lse)
      : FlashAttentionShape(kernel, qkv, n_head, n_kv_head, like_qkv, like_out, lse) {
    GLASS_CHECK(qkv.dtype() == DType::f32 || qkv.dtype() == DType::bf16,
                "{}: qkv {} is {}; the flash kernels take f32 or bf16", kernel, qkv.describe(),
                dtype_name(qkv.dtype()));
    GLASS_CHECK(flash_head_dim_ok(D),
                "{}: head dim D = C / n_head = {} / {} = {} is not supported: it must be a "
                "multiple of 8 in {}..{}",
                kernel, C, n_head, D, kFlashMinHeadDim, kFlashMaxHeadDim);
    GLASS_CHECK(slices() <= 65535, "{}: B * n_head = {} exceeds the grid's 65535 in y", kernel,
                slices());
  }
  // query tiles of `rows` rows, times the slices
  dim3 grid(int rows) const { return dim3(ceil_div(T, rows), static_cast<unsigned>(slices())); }
  // key tiles, times the key/value slices
  dim3 key_grid() const { return dim3(ceil_div(T, kTile), static_cast<unsigned>(kv_slices())); }
  // shared memory of `tiles` [kTile][D] tiles, `blocks` [kTile][kPad] ones and `rows` [kTile]
  // ones; in the forward the Q tile and P block have kForwardRows rows
  size_t shared_bytes(int tiles, int blocks, int rows) const {
    return static_cast<size_t>(tiles * kTile * tile_pitch(D) + blocks * kTile * kPad +
                               rows * kTile) *
           sizeof(float);
  }
  size_t forward_shared_bytes() const {
    return static_cast<size_t>((kForwardRows + 2 * kTile) * tile_pitch(D) + kForwardRows * kPad) *
           sizeof(float);
  }
  // per slice, rows of K (or V) the query tiles of `tile` rows load: tile q0 loads keys up to
  // min(T, q0 + tile) (a multiple of kTile)
  double keys_loaded(int tile) const {
    double rows = 0;
    for (int64_t q0 = 0; q0 < T; q0 += tile) rows += static_cast<double>(std::min(T, q0 + tile));
    return rows;
  }
  // per slice, rows of Q (or dO) the key tiles load: tile k0 loads queries k0..T
  double queries_loaded() const {
    double rows = 0;
    for (int64_t k0 = 0; k0 < T; k0 += kTile) rows += static_cast<double>(T - k0);
    return rows;
  }
  // bytes of `rows` head rows (D elements each) over all (query) slices, and over the key/value
  // slices
  double head_bytes(double rows, size_t elem) const {
    return static_cast<double>(slices()) * rows * static_cast<double>(D * elem);
  }
  double kv_head_bytes(double rows, size_t elem) const {
    return static_cast<double>(kv_slices()) * rows * static_cast<double>(D * elem);
  }
  double lse_bytes() const { return static_cast<double>(slices() * T) * sizeof(float); }
};

}  // namespace

void flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale) {
  const char* kernel = "flash_attention_forward";
  const FlashGeometry g(kernel, qkv, n_head, n_kv_head, {}, {&out}, lse);
  if (qkv.numel() == 0) return;
  const size_t e = dtype_size(qkv.dtype());
  const double flops = flash_attention_forward_flops(g.slices(), g.T, g.D);
  // bytes: Q read and O written once; K and V once per query tile that sees them (each query
  // head's blocks load their key/value head's); lse written
  const double bytes = g.head_bytes(2.0 * g.T + 2 * g.keys_loaded(kForwardRows), e) + g.lse_bytes();
  const LaunchInfo info =
      kernel_launch_info(kernel, qkv, g.grid(kForwardRows), dim3(kForwardThreads),
                         g.forward_shared_bytes(), flops, bytes);
  visit_f32_bf16(qkv, kernel, [&]<class E>() {
    launch_cuda_kernel(info, flash_attention_forward_kernel<E>, qkv.data<E>(), out.data<E>(),
                       lse.data<float>(), QkvHeads::of(g), static_cast<float>(scale));
  });
}

void flash_attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                              const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                              int64_t n_kv_head, double scale) {
  const char* kernel = "flash_attention_backward";
  const FlashGeometry g(kernel, qkv, n_head, n_kv_head, {&dqkv}, {&out, &dout}, lse);
  if (qkv.numel() == 0) return;
  const size_t e = dtype_size(qkv.dtype());
  const Tensor delta = Tensor::empty(lse.shape(), DType::f32, qkv.device());  // D = rowsum(dO∘O)
  // 1. D, then dQ (kernels/costs/attention.h). Bytes: Q, dO, O read and dQ written once, K and V
  //    once per query tile, lse read and D written.
  const LaunchInfo query_info = kernel_launch_info(
      "flash_attention_backward_query", qkv, g.grid(kTile), dim3(kThreads), g.shared_bytes(4, 1, 0),
      flash_attention_backward_query_flops(g.slices(), g.T, g.D),
      g.head_bytes(4.0 * g.T + 2 * g.keys_loaded(kTile), e) + 2 * g.lse_bytes());
  visit_f32_bf16(qkv, kernel, [&]<class E>() {
    launch_cuda_kernel(query_info, flash_attention_backward_query_kernel<E>, qkv.data<E>(),
                       out.data<E>(), lse.data<float>(), dout.data<E>(), delta.data<float>(),
                       dqkv.data<E>(), QkvHeads::of(g), static_cast<float>(scale));
  });
  // 2. dK and dV (kernels/costs/attention.h). Bytes: K, V read and dK, dV written once per
  //    key/value slice; Q, dO, lse and D of each of its query heads once per key tile that sees
  //    them.
  const LaunchInfo key_info = kernel_launch_info(
      "flash_attention_backward_key", qkv, g.key_grid(), dim3(kThreads), g.shared_bytes(4, 2, 2),
      flash_attention_backward_key_flops(g.slices(), g.T, g.D),
      g.kv_head_bytes(4.0 * g.T, e) + g.head_bytes(2 * g.queries_loaded(), e) +
          2 * static_cast<double>(g.slices()) * g.queries_loaded() * sizeof(float));
  visit_f32_bf16(qkv, kernel, [&]<class E>() {
    launch_cuda_kernel(key_info, flash_attention_backward_key_kernel<E>, qkv.data<E>(),
                       lse.data<float>(), dout.data<E>(), delta.data<float>(), dqkv.data<E>(),
                       QkvHeads::of(g), static_cast<float>(scale));
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
