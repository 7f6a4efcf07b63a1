// cpu kernels of the flash attention entries (contract in kernels/backend.h): causal attention
// read straight from qkv [B, T, (H + 2 Hkv) D], out [B, T, C = H D], lse [B, H, T], with no T x T
// buffer. Query head h reads key/value head h / (H / Hkv) (grouped-query attention; Hkv = H is
// multi-head attention, qkv [B, T, 3C]).
//
//   S_ij = q_i . k_j * scale (j <= i);  lse_i = log sum_j exp(S_ij);  P_ij = exp(S_ij - lse_i)
//   out_i = sum_j P_ij v_j
//   backward: D_i = dO_i . O_i;  dS_ij = P_ij (dO_i . v_j - D_i)
//             dq_i = scale sum_j dS_ij k_j;  dk_j = scale sum_i dS_ij q_i;  dv_j = sum_i P_ij dO_i
//   grouped: dk_j and dv_j of a key/value head sum those sums over its query heads
//
// FlashAttention's idea at the grain a CPU core likes: a block of kQueryBlock query rows at a
// time, against all the keys it may see (0 .. its last row, the causal bound), with every product
// one GEMM (kernels/cpu/sgemm.cpp) on strided views of qkv: head h of q is the D columns at h*D
// with row stride (H + 2 Hkv) D, so nothing is copied out and the output lands in [B, T, C]
// directly. A block sees all its keys at once, so its softmax is exact without FlashAttention's
// running max: the scratch is kQueryBlock x T scores per thread (L2-sized), never T x T. Backward
// recomputes P from the saved lse instead of storing it. The GEMMs are told which of their entries
// the causal mask makes zero or unwanted (sgemm's `Causal`): a register tile (8 x 32) above the
// diagonal is never computed, and a sum over keys stops at the tile's last query; only the tiles
// the diagonal crosses compute a few masked entries (P is 0 there). Scores past a row's diagonal
// are never read: the rows are zeroed there before a GEMM sums over them.
//
// The (batch, head) slices run in parallel, each on one thread (the GEMMs see they are inside a
// parallel region); a slice writes only its own head's columns and sums every element in a fixed
// order, so the result is deterministic. Backward runs the (batch, key/value head) slices in
// parallel, each walking its query heads in order, so their dK and dV sums have a fixed order too.
// Takes any D, f32, f64 (gradcheck) and bf16. bf16 reads q, k, v (and out, dout) in bf16 and
// computes in f32, as emu's and cuda's flash entries do: each slice's heads are converted to f32
// once (a T x D copy beside the T x T x D work), run through the f32 path, and the outputs are
// rounded to bf16 once when stored (out; dq per query head; dk and dv after their group's sums).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/costs/attention.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

constexpr int64_t kQueryBlock = 64;

// One slice's rows: element (t, d) of q, k, v, out, dout, dq, dk, dv at row t * pitch + d.
template <class T>
struct Head {
  T* base;
  int64_t pitch;
  T* row(int64_t t) const { return base + t * pitch; }
};

// The query blocks of a slice: rows [first, first + rows), which see keys [0, keys).
struct QueryBlock {
  int64_t first, rows, keys;
};
QueryBlock query_block(int64_t first, int64_t T_len) {
  const int64_t rows = std::min(kQueryBlock, T_len - first);
  return {first, rows, first + rows};
}
template <class Fn>
void for_each_query_block(int64_t T_len, Fn&& fn) {
  for (int64_t first = 0; first < T_len; first += kQueryBlock) fn(query_block(first, T_len));
}
// The same, last block first.
template <class Fn>
void for_each_query_block_from_last(int64_t T_len, Fn&& fn) {
  for (int64_t first = (T_len - 1) / kQueryBlock * kQueryBlock; first >= 0; first -= kQueryBlock)
    fn(query_block(first, T_len));
}

// Row r of a block's scores S into probabilities P = exp(S - lse) over the `seen` keys up to
// the diagonal, 0 for the rest of the block's keys (whose scores may be anything), in whole
// blocks of 16 (cpu.h; a block's keys are a multiple of 16 when it has room, else entry by entry).
template <class T>
void causal_probs_row(T* row, int64_t seen, int64_t keys, T row_lse) {
  if (whole_blocks(seen) > keys) {
    for (int64_t j = 0; j < keys; ++j) row[j] = j < seen ? exp_vectorisable(row[j] - row_lse) : 0;
    return;
  }
  for_each_in_blocks(seen, [&](int64_t j, int64_t, bool live) {
    const T p = exp_vectorisable(row[j] - row_lse);
    row[j] = live ? p : T(0);
  });
  std::fill(row + whole_blocks(seen), row + keys, T(0));
}

// Slice s's (batch s / H, query head s % H) rows of q, k, v, out in `qkv` and `out` (or of their
// gradients in dqkv and dout): k and v those of its key/value head.
template <class T>
struct SliceHeads {
  Head<T> q, k, v, o;
  SliceHeads() = default;
  SliceHeads(const FlashAttentionShape& g, int64_t s, const Tensor& qkv, const Tensor& out) {
    const int64_t b = s / g.H, h = s % g.H;
    T* base = qkv.data<T>() + b * g.T * g.W;
    q = {base + g.q_col(h), g.W};
    k = {base + g.k_col(h), g.W};
    v = {base + g.v_col(h), g.W};
    o = {out.data<T>() + b * g.T * g.C + h * g.D, g.C};
  }
};

// A slice's T x D rows of head `h` converted to f32 in `to` (pitch D), or f32 rows `from` rounded
// into h: bf16's staging (kernels/cpu/element.h).
void head_to_f32(const Head<bf16>& h, int64_t Tn, int64_t D, float* to) {
  for (int64_t t = 0; t < Tn; ++t) {
    const bf16* row = h.row(t);
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) to[t * D + d] = to_compute(row[d]);
  }
}
void f32_to_head(const float* from, int64_t Tn, int64_t D, const Head<bf16>& h) {
  for (int64_t t = 0; t < Tn; ++t) {
    bf16* row = h.row(t);
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) row[d] = from_compute<bf16>(from[t * D + d]);
  }
}

// Slice s's forward (batch s / H, query head s % H) on heads of one type (f32 or f64, or bf16's
// f32 copies): block by block of queries, scores the thread's kQueryBlock x T scratch.
template <class T>
void attention_slice_forward(int64_t Tn, int64_t D, double scale, const SliceHeads<T>& x,
                             float* lse_row, T* scores) {
  const Head<T>&q = x.q, &k = x.k, &v = x.v, &o = x.o;
  const T scale_t = static_cast<T>(scale);
  for_each_query_block(Tn, [&](QueryBlock blk) {
    T* S = scores;  // rows x keys, row stride keys
    // 1. S = scale Q_block K^T, up to the diagonal (query r sees keys up to first + r)
    blas_gemm(false, true, blk.rows, blk.keys, D, scale_t, q.row(blk.first), q.pitch, k.row(0),
              k.pitch, T(0), S, blk.keys, {Causal::kLowerC, blk.first});
    // 2. each row: P = softmax over its causal keys, 0 past the diagonal; keep the lse
    for (int64_t r = 0; r < blk.rows; ++r) {
      T* row = S + r * blk.keys;
      const int64_t seen = blk.first + r + 1;
      lse_row[blk.first + r] =
          static_cast<float>(masked_softmax_row(row, row, seen, blk.keys).value());
    }
    // 3. O_block = P V, written straight into out's head columns, each query's sum stopping at
    // its last key
    blas_gemm(false, false, blk.rows, D, blk.keys, T(1), S, blk.keys, v.row(0), v.pitch, T(0),
              o.row(blk.first), o.pitch, {Causal::kLowerA, blk.first});
  });
}

// Backward of slice s (batch s / H, head s % H), block by block of queries, the last block first:
// it sees every key, so when `first` (the first query head of its key/value head) its dK and dV
// products (beta 0) write all of dK and dV, and each earlier block, and every later query head of
// the group, adds to the keys it sees; no pass zeroes them first. probs and dscores are this
// thread's kQueryBlock x T scratch.
template <class T>
void attention_slice_backward(int64_t Tn, int64_t D, bool first, double scale,
                              const SliceHeads<T>& x, const SliceHeads<T>& dx, const float* lse_row,
                              T* probs, T* dscores) {
  const Head<T>&q = x.q, &k = x.k, &v = x.v, &o = x.o;
  const Head<T>&dq = dx.q, &dk = dx.k, &dv = dx.v, &dO = dx.o;
  for_each_query_block_from_last(Tn, [&](QueryBlock blk) {
    // beta of dK, dV: 0 for the last block (the first done) of the group's first query head
    const T gather = first && blk.keys == Tn ? T(0) : T(1);
    // the causal structure of this block's products, in the block's row numbering: query r sees
    // keys up to first + r, so key j gets gradient from the queries r >= j - first
    const Causal scores_wanted{Causal::kLowerC, blk.first}, keys_seen{Causal::kLowerA, blk.first},
        queries_seeing{Causal::kUpperA, -blk.first};
    // 1. P recomputed: S = scale Q_block K^T, P = exp(S - lse) up to the diagonal, 0 past it
    blas_gemm(false, true, blk.rows, blk.keys, D, T(scale), q.row(blk.first), q.pitch, k.row(0),
              k.pitch, T(0), probs, blk.keys, scores_wanted);
    for (int64_t r = 0; r < blk.rows; ++r) {
      T* row = probs + r * blk.keys;
      causal_probs_row(row, blk.first + r + 1, blk.keys, T(lse_row[blk.first + r]));
    }
    // 2. dV[0, keys) += P^T dO_block
    blas_gemm(true, false, blk.keys, D, blk.rows, T(1), probs, blk.keys, dO.row(blk.first),
              dO.pitch, gather, dv.row(0), dv.pitch, queries_seeing);
    // 3. dP = dO_block V^T
    blas_gemm(false, true, blk.rows, blk.keys, D, T(1), dO.row(blk.first), dO.pitch, v.row(0),
              v.pitch, T(0), dscores, blk.keys, scores_wanted);
    // 4. dS = P (dP - D_i), D_i = dO_i . O_i, up to the diagonal; 0 past it (where dP was not
    // computed)
    for (int64_t r = 0; r < blk.rows; ++r) {
      const T delta = row_dot(dO.row(blk.first + r), o.row(blk.first + r), D);
      const int64_t seen = blk.first + r + 1;
      T* ds = dscores + r * blk.keys;
      const T* p = probs + r * blk.keys;
#pragma omp simd
      for (int64_t j = 0; j < blk.keys; ++j) ds[j] = j < seen ? p[j] * (ds[j] - delta) : T(0);
    }
    // 5. dQ_block = scale dS K;  dK[0, keys) += scale dS^T Q_block
    blas_gemm(false, false, blk.rows, D, blk.keys, T(scale), dscores, blk.keys, k.row(0), k.pitch,
              T(0), dq.row(blk.first), dq.pitch, keys_seen);
    blas_gemm(true, false, blk.keys, D, blk.rows, T(scale), dscores, blk.keys, q.row(blk.first),
              q.pitch, gather, dk.row(0), dk.pitch, queries_seeing);
  });
}

}  // namespace

void flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale) {
  const char* kernel = "flash_attention_forward";
  const FlashAttentionShape g(kernel, qkv, n_head, n_kv_head, {}, {&out}, lse);
  if (qkv.numel() == 0) return;
  const int64_t Tn = g.T, D = g.D;
  const double flops = flash_attention_forward_flops(g.slices(), Tn, D);
  visit_element(qkv, kernel, [&]<class T>() {
    launch(cpu_launch_info(kernel, g.slices(), flops, bytes_of({&qkv, &out, &lse})), [&] {
      const bool threaded = worth_threading(g.slices(), g.slices() * Tn * Tn * D);
      parallel_ranges(g.slices(), threaded, [&](int64_t first, int64_t last) {
        using C = compute_t<T>;
        std::vector<C> scores(static_cast<size_t>(std::min(kQueryBlock, Tn) * Tn));
        // bf16: the slice's q, k, v, o in f32
        std::vector<float> staged(std::is_same_v<T, bf16> ? static_cast<size_t>(4 * Tn * D) : 0);
        for (int64_t s = first; s < last; ++s) {
          const SliceHeads<T> x(g, s, qkv, out);
          float* lse_row = lse.data<float>() + s * Tn;
          if constexpr (std::is_same_v<T, bf16>) {
            SliceHeads<float> xf;
            xf.q = {staged.data(), D};
            xf.k = {staged.data() + Tn * D, D};
            xf.v = {staged.data() + 2 * Tn * D, D};
            xf.o = {staged.data() + 3 * Tn * D, D};
            head_to_f32(x.q, Tn, D, xf.q.base);
            head_to_f32(x.k, Tn, D, xf.k.base);
            head_to_f32(x.v, Tn, D, xf.v.base);
            attention_slice_forward(Tn, D, scale, xf, lse_row, scores.data());
            f32_to_head(xf.o.base, Tn, D, x.o);
          } else {
            attention_slice_forward(Tn, D, scale, x, lse_row, scores.data());
          }
        }
      });
    });
  });
}

void flash_attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                              const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                              int64_t n_kv_head, double scale) {
  const char* kernel = "flash_attention_backward";
  const FlashAttentionShape g(kernel, qkv, n_head, n_kv_head, {&dqkv}, {&out, &dout}, lse);
  if (qkv.numel() == 0) return;
  const int64_t Tn = g.T, D = g.D;
  const double flops = flash_attention_backward_flops(g.slices(), Tn, D);  // in one pass
  visit_element(qkv, kernel, [&]<class T>() {
    launch(cpu_launch_info(kernel, g.slices(), flops, bytes_of({&qkv, &out, &lse, &dout, &dqkv})),
           [&] {
             const bool threaded = worth_threading(g.kv_slices(), g.slices() * Tn * Tn * D);
             parallel_ranges(g.kv_slices(), threaded, [&](int64_t first, int64_t last) {
               using C = compute_t<T>;
               const size_t scratch = static_cast<size_t>(std::min(kQueryBlock, Tn) * Tn);
               std::vector<C> probs(scratch), dscores(scratch);
               // bf16: f32 copies of k, v, dk, dv (once for the group) and q, o, dout, dq (per
               // query head)
               std::vector<float> staged(std::is_same_v<T, bf16> ? static_cast<size_t>(8 * Tn * D)
                                                                 : 0);
               // key/value slice kv's query slices are kv * group .. (kv + 1) * group - 1
               for (int64_t kv = first; kv < last; ++kv) {
                 if constexpr (std::is_same_v<T, bf16>) {
                   SliceHeads<float> xf, dxf;
                   float* p = staged.data();
                   for (Head<float>* h :
                        {&xf.q, &xf.k, &xf.v, &xf.o, &dxf.q, &dxf.k, &dxf.v, &dxf.o}) {
                     *h = {p, D};
                     p += Tn * D;
                   }
                   const int64_t s0 = kv * g.group();
                   const SliceHeads<T> x0(g, s0, qkv, out), dx0(g, s0, dqkv, dout);
                   head_to_f32(x0.k, Tn, D, xf.k.base);
                   head_to_f32(x0.v, Tn, D, xf.v.base);
                   for (int64_t s = s0; s < s0 + g.group(); ++s) {
                     const SliceHeads<T> x(g, s, qkv, out), dx(g, s, dqkv, dout);
                     head_to_f32(x.q, Tn, D, xf.q.base);
                     head_to_f32(x.o, Tn, D, xf.o.base);
                     head_to_f32(dx.o, Tn, D, dxf.o.base);
                     attention_slice_backward<float>(Tn, D, s == s0, scale, xf, dxf,
                                                     lse.data<float>() + s * Tn, probs.data(),
                                                     dscores.data());
                     f32_to_head(dxf.q.base, Tn, D, dx.q);
                   }
                   f32_to_head(dxf.k.base, Tn, D, dx0.k);
                   f32_to_head(dxf.v.base, Tn, D, dx0.v);
                 } else {
                   for (int64_t s = kv * g.group(); s < (kv + 1) * g.group(); ++s)
                     attention_slice_backward<T>(
                         Tn, D, s == kv * g.group(), scale, SliceHeads<T>(g, s, qkv, out),
                         SliceHeads<T>(g, s, dqkv, dout), lse.data<float>() + s * Tn, probs.data(),
                         dscores.data());
                 }
               }
             });
           });
  });
}

}  // namespace glass::kernels::cpu
