// CUDA kernels for causal scaled-dot-product attention: q, out [B, H, T, D], k, v [B, Hkv, T, D]
// and probs [B, H, T, T], all contiguous f32 or bf16 (contracts in kernels/kernel_list.inc; the cpu
// reference is kernels/cpu/attention.cpp). Query slice s (batch, head) reads key/value slice
// s / group, group = H / Hkv (grouped-query attention; Hkv = H is multi-head).
//
//   forward:  S = Q K^T * scale; P[i] = softmax of S[i, 0..i], P[i, j > i] = 0 (the causal mask);
//             out = P V. P is stored in probs for backward.
//   backward: dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dP * P));
//             dQ = dS K * scale; dK = dS^T Q * scale.
//
// Plain (not flash) kernels, one block per row of one (batch, head) slice; grid.x = slices * T.
// Only the causal triangle j <= i is computed.
// - forward, block (slice, query row i): q_i goes to shared memory; threads over keys j <= i
//   compute s_j = q_i . k_j * scale into a shared row; block max and sum (warp butterfly shuffles,
//   then the warps in warp order) turn it into P[i], written out with zeros above the diagonal;
//   then threads over d compute out_i[d] = sum_j P_ij v_j[d] (reads of V coalesced over d).
// - backward, kernel 1, block (slice, row i): dP_ij = dO_i . V_j over j <= i (threads over j),
//   the row dot sum_j dP_ij P_ij by block reduction, dS_ij = P_ij (dP_ij - dot) into shared memory
//   and into a scratch tensor dS [slices, T, T] (lower triangle only), then
//   dQ_i[d] = scale * sum_j dS_ij K_j[d] (threads over d).
// - backward, kernel 2, block (key/value slice, key row j): threads over d sum over the query
//   heads of the group in order, and over their queries i >= j:
//   dV_j[d] = sum_i P_ij dO_i[d], dK_j[d] = scale * sum_i dS_ij Q_i[d].
// Each output element is summed by one thread in a fixed order (no atomics), so results are
// bit-identical run to run. FLOPs count the triangle actually computed: 2D per entry per product
// (two products forward, four backward) plus the softmax's 5 (forward) / 4 (backward) per entry.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "engine/emu/dynamic_shared.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kMaxThreads = 256;

// Every kernel is templated on the stored element type E of q, k, v, probs and the outputs (float
// or bf16); loads convert to f32 (to_compute), shared memory, scores, sums and dS are f32, and
// each output element is rounded once when stored (from_compute).

// sum_d a[d] * b[d], a in shared memory (f32), b a row of E
template <class E>
__device__ float dot(const float* a, const E* b, int64_t D) {
  float s = 0;
  for (int64_t d = 0; d < D; ++d) s += a[d] * to_compute(b[d]);
  return s;
}

// One block per (slice, query row i). Dynamic shared memory: q_i [D], then the row of P [T].
template <class E>
__global__ void attention_forward_kernel(const E* q, const E* k, const E* v, E* out, E* probs,
                                         int64_t T, int64_t D, int64_t group, float scale) {
  GLASS_DYNAMIC_SHARED(float, shared);
  float* qi = shared;
  float* p = shared + D;
  const int64_t slice = blockIdx.x / T, i = blockIdx.x % T;
  const E* K = k + slice / group * T * D;
  const E* V = v + slice / group * T * D;
  // 1. stage q_i in shared memory
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
    qi[d] = to_compute(q[(slice * T + i) * D + d]);
  __syncthreads();
  // 2. scores s_j = q_i . k_j * scale for j <= i, and their maximum
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    p[j] = dot(qi, K + j * D, D) * scale;
    m = p[j] > m ? p[j] : m;
  }
  m = block_reduce(m, Max{});
  // 3. exponentiate the shifted scores and sum them
  float sum = 0;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    p[j] = expf(p[j] - m);
    sum += p[j];
  }
  const float inv = 1.0f / block_reduce(sum, Sum{});
  // 4. normalise and store the row of P, zero above the diagonal
  E* prow = probs + (slice * T + i) * T;
  for (int64_t j = threadIdx.x; j < T; j += blockDim.x) {
    if (j <= i) p[j] *= inv;
    prow[j] = from_compute<E>(j <= i ? p[j] : 0.0f);
  }
  __syncthreads();
  // 5. out_i[d] = sum_{j <= i} P_ij v_j[d], threads over d
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j <= i; ++j) acc += p[j] * to_compute(V[j * D + d]);
    out[(slice * T + i) * D + d] = from_compute<E>(acc);
  }
}

// Backward kernel 1, one block per (slice, query row i): the row of dS (into shared memory and
// into ds [slices, T, T], j <= i), then dQ_i. Dynamic shared memory: dO_i [D], then dS_i [T].
template <class E>
__global__ void attention_backward_query_kernel(const E* k, const E* v, const E* probs,
                                                const E* dout, E* dq, float* ds, int64_t T,
                                                int64_t D, int64_t group, float scale) {
  GLASS_DYNAMIC_SHARED(float, shared);
  float* doi = shared;
  float* dsi = shared + D;
  const int64_t slice = blockIdx.x / T, i = blockIdx.x % T;
  const E* K = k + slice / group * T * D;
  const E* V = v + slice / group * T * D;
  const E* prow = probs + (slice * T + i) * T;
  // 1. stage dO_i in shared memory
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
    doi[d] = to_compute(dout[(slice * T + i) * D + d]);
  __syncthreads();
  // 2. dP_ij = dO_i . v_j for j <= i, and the row dot sum_j dP_ij P_ij
  float row_dot = 0;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    dsi[j] = dot(doi, V + j * D, D);
    row_dot += dsi[j] * to_compute(prow[j]);
  }
  row_dot = block_reduce(row_dot, Sum{});
  // 3. dS_ij = P_ij (dP_ij - dot), kept in shared memory and stored for kernel 2
  float* dsrow = ds + (slice * T + i) * T;
  for (int64_t j = threadIdx.x; j <= i; j += blockDim.x) {
    dsi[j] = to_compute(prow[j]) * (dsi[j] - row_dot);
    dsrow[j] = dsi[j];
  }
  __syncthreads();
  // 4. dQ_i[d] = scale * sum_{j <= i} dS_ij k_j[d], threads over d
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j <= i; ++j) acc += dsi[j] * to_compute(K[j * D + d]);
    dq[(slice * T + i) * D + d] = from_compute<E>(scale * acc);
  }
}

// Backward kernel 2, one block per (key/value slice, key row j), threads over d: the column j of
// P and dS of each query slice of the group, in order, against the rows i >= j of its dO and Q.
template <class E>
__global__ void attention_backward_key_kernel(const E* q, const E* probs, const E* dout,
                                              const float* ds, E* dk, E* dv, int64_t T, int64_t D,
                                              int64_t group, float scale) {
  const int64_t kv_slice = blockIdx.x / T, j = blockIdx.x % T;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    // dV_j[d] = sum_s sum_{i >= j} P_ij dO_i[d];  dK_j[d] = scale * sum_s sum_{i >= j} dS_ij Q_i[d]
    float dv_acc = 0, dk_acc = 0;
    for (int64_t slice = kv_slice * group; slice < (kv_slice + 1) * group; ++slice) {
      const E* Q = q + slice * T * D;
      const E* dO = dout + slice * T * D;
      const E* P = probs + slice * T * T;
      const float* dS = ds + slice * T * T;
      for (int64_t i = j; i < T; ++i) {
        dv_acc += to_compute(P[i * T + j]) * to_compute(dO[i * D + d]);
        dk_acc += dS[i * T + j] * to_compute(Q[i * D + d]);
      }
    }
    dv[(kv_slice * T + j) * D + d] = from_compute<E>(dv_acc);
    dk[(kv_slice * T + j) * D + d] = from_compute<E>(scale * dk_acc);
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

// The launch geometry and FLOPs of the kernels below, on top of the shared checks.
struct AttentionGeometry : AttentionShape {
  AttentionGeometry(const char* kernel, const Tensor& q,
                    std::initializer_list<const Tensor*> like_q,
                    std::initializer_list<const Tensor*> like_kv, const Tensor& probs)
      : AttentionShape(kernel, q, like_q, like_kv, probs) {}
  // `products` T x T x D products over the causal triangle plus `per_entry` per causal entry
  double flops(int products, int per_entry) const {
    const double entries = static_cast<double>(slices) * static_cast<double>(T * (T + 1) / 2);
    return entries * (products * 2.0 * static_cast<double>(D) + per_entry);
  }
  // One block per row; threads: whole warps covering max(T, D), at most kMaxThreads.
  dim3 block() const { return dim3(whole_warps(std::max(T, D), kMaxThreads)); }
  // Shared memory of the row kernels: a D-vector and a T-row.
  size_t shared_bytes() const { return static_cast<size_t>(D + T) * sizeof(float); }
};

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& probs, double scale) {
  const char* kernel = "attention_forward";
  const AttentionGeometry g(kernel, q, {&q, &out}, {&k, &v}, probs);
  if (q.numel() == 0) return;
  const LaunchInfo info =
      kernel_launch_info(kernel, q, dim3(static_cast<unsigned>(g.rows())), g.block(),
                         g.shared_bytes(), g.flops(2, 5), bytes_of({&q, &k, &v, &out, &probs}));
  visit_f32_bf16(q, kernel, [&]<class E>() {
    launch_cuda_kernel(info, attention_forward_kernel<E>, q.data<E>(), k.data<E>(), v.data<E>(),
                       out.data<E>(), probs.data<E>(), g.T, g.D, g.group,
                       static_cast<float>(scale));
  });
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        double scale) {
  const char* kernel = "attention_backward";
  const AttentionGeometry g(kernel, q, {&q, &dout, &dq}, {&k, &v, &dk, &dv}, probs);
  if (q.numel() == 0) return;
  const Tensor ds = Tensor::empty(probs.shape(), DType::f32, q.device());  // lower triangle used
  const dim3 grid(static_cast<unsigned>(g.rows()));
  // 1. per query row: dS (two of the four products: dP and dQ) and dQ
  const LaunchInfo query_info =
      kernel_launch_info("attention_backward_query", q, grid, g.block(), g.shared_bytes(),
                         g.flops(2, 4), bytes_of({&k, &v, &probs, &dout, &dq, &ds}));
  visit_f32_bf16(q, kernel, [&]<class E>() {
    launch_cuda_kernel(query_info, attention_backward_query_kernel<E>, k.data<E>(), v.data<E>(),
                       probs.data<E>(), dout.data<E>(), dq.data<E>(), ds.data<float>(), g.T, g.D,
                       g.group, static_cast<float>(scale));
  });
  // 2. per key row of each key/value slice: dV and dK (the other two products)
  const LaunchInfo key_info = kernel_launch_info(
      "attention_backward_key", q, dim3(static_cast<unsigned>(g.kv_slices() * g.T)),
      dim3(whole_warps(g.D, kMaxThreads)), 0, g.flops(2, 0),
      bytes_of({&q, &probs, &dout, &ds, &dk, &dv}));
  visit_f32_bf16(q, kernel, [&]<class E>() {
    launch_cuda_kernel(key_info, attention_backward_key_kernel<E>, q.data<E>(), probs.data<E>(),
                       dout.data<E>(), ds.data<float>(), dk.data<E>(), dv.data<E>(), g.T, g.D,
                       g.group, static_cast<float>(scale));
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
