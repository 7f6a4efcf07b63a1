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
// Takes any D, f32, f64 (gradcheck) and bf16.
//
// bf16 follows the Tensor Core flash kernel's rounding (`flash-mma`, kernels/cuda/
// flash_attention_mma.cu), reading q, k, v (and out, dout) where they are stored: every product
// takes bf16 operands and sums in f32 (attention_gemm_bf16.cpp: the vdpbf16ps micro-kernel of the
// bf16 GEMM, or its exact scalar model on a CPU without AVX512-BF16; the same bits either way,
// with the causal band above); the softmax, lse and D_i stay f32; P (forward: exp(S - max), not
// yet divided by the row's sum, which divides O in f32 as the GPU's O / l does; backward: exp(S -
// lse)) and dS = P (dP - D_i), computed from the f32 P, are rounded to bf16 where they enter a
// product; out, dq, and dk and dv after their group's f32 sums, are rounded to bf16 once. What
// differs from flash-mma is the order of the f32 sums (an mma sums 16 products at once; vdpbf16ps
// adds two at a time), exp and log against exp2 and log2, and the softmax: flash-mma's runs online
// over 64-key tiles, here a block sees its whole row, so its max is the row's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/costs/attention.h"
#include "kernels/cpu/attention_gemm_bf16.h"
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

// One thread's scratch for bf16 slices: a query block's f32 scores S and dP (kQueryBlock x T),
// its bf16 operands P and dS, its f32 O or dQ before rounding (kQueryBlock x D) with each row's
// factor, a key/value head's f32 dK and dV sums (T x D), and its K and V packed once for all its
// blocks (as K^T and V for the forward, K^T, V^T and K for the backward).
struct Bf16Scratch {
  std::vector<float> scores, dscores, rows, row_factor, dk, dv;
  std::vector<bf16> probs, dprobs;
  PackedBf16B k_t, v_t, k, v;  // op(B) = K^T, V^T, K, V
  Bf16Scratch(int64_t Tn, int64_t D, bool backward) {
    const auto block = static_cast<size_t>(std::min(kQueryBlock, Tn));
    const auto keys = static_cast<size_t>(Tn), dim = static_cast<size_t>(D);
    scores.resize(block * keys);
    probs.resize(block * keys);
    rows.resize(block * dim);
    row_factor.resize(block);
    if (!backward) return;
    dscores.resize(block * keys);
    dprobs.resize(block * keys);
    dk.resize(keys * dim);
    dv.resize(keys * dim);
  }
};

// Rows of f32 `from` (pitch D) times their factor (one per row, or `factor` for all) rounded to
// bf16 into head rows: bf16's one rounding of an output.
void store_rows_bf16(const float* from, int64_t rows, int64_t D, const float* row_factor,
                     float factor, const Head<bf16>& to, int64_t first) {
  for (int64_t r = 0; r < rows; ++r) {
    bf16* row = to.row(first + r);
    const float f = row_factor ? row_factor[r] : factor;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) row[d] = bf16::from_float(from[r * D + d] * f);
  }
}

// f(j, lane, live) for the entries j of a causal row of `seen` keys (of a block's `keys`; live: j <
// seen): in whole blocks of 16 where the row has room (cpu.h's for_each_in_blocks: every block one
// vector, no scalar remainder, which would cost an exp per entry), else entry by entry. Returns
// where it stopped.
template <class F>
[[gnu::always_inline]] inline int64_t for_each_causal_entry(int64_t seen, int64_t keys, F f) {
  if (whole_blocks(seen) > keys) {
    for (int64_t j = 0; j < seen; ++j) f(j, int64_t{0}, true);
    return seen;
  }
  for_each_in_blocks(seen, [&](int64_t j, int64_t lane, bool live) { f(j, lane, live); });
  return whole_blocks(seen);
}

// Row r of a block's raw scores s (row of `keys`; the entries from `seen` on may be anything) into
// p = bf16(exp(x - max)), x = scale s, over the seen keys, 0 past them: the forward's unnormalised
// probabilities, which P V takes as they are and O divides by their f32 sum (summed lane by lane,
// then the lanes in order). s is left holding exp(x - max) in f32.
struct RowSum {
  float max, sum;
};
RowSum unnormalised_probs_row(float* s, int64_t seen, int64_t keys, float scale, bf16* p) {
  float lane_max[kRowLanes], lane_sum[kRowLanes] = {};
  std::fill(lane_max, lane_max + kRowLanes, -std::numeric_limits<float>::infinity());
  for_each_causal_entry(seen, keys, [&](int64_t j, int64_t lane, bool live) {
    s[j] *= scale;
    lane_max[lane] = live && s[j] > lane_max[lane] ? s[j] : lane_max[lane];
  });
  const float mx = *std::max_element(lane_max, lane_max + kRowLanes);
  const int64_t end = for_each_causal_entry(seen, keys, [&](int64_t j, int64_t lane, bool live) {
    const float e = live ? exp_vectorisable(s[j] - mx) : 0.0f;
    lane_sum[lane] += e;
    s[j] = e;
  });
  // rounded in a loop of its own: with the rounding inside the 16-entry blocks above, GCC ran
  // them on 256-bit halves (round_row_to_bf16, cpu.h)
  round_row_to_bf16(s, p, end);
  std::fill(p + end, p + keys, bf16{});
  float sum = 0;
  for (const float part : lane_sum) sum += part;
  return {mx, sum};
}

// bf16 slice s's forward with the Tensor Core flash kernel's rounding (kernels/cuda/
// flash_attention_mma.cu): S = Q K^T summed in f32 from bf16 q, k; the softmax in f32 (x = scale
// S, m = max x, p = exp(x - m), l = sum p, lse = m + log l); p rounded to bf16 for O = P V, summed
// in f32; out = bf16(O * (1 / l)). Every product by attention_gemm_bf16 with the causal band.
void attention_slice_forward_bf16(int64_t Tn, int64_t D, float scale, const SliceHeads<bf16>& x,
                                  float* lse_row, Bf16Scratch& w) {
  w.k_t.pack(x.k.row(0), x.k.pitch, true, D, Tn);
  w.v.pack(x.v.row(0), x.v.pitch, false, Tn, D);
  for_each_query_block(Tn, [&](QueryBlock blk) {
    float* S = w.scores.data();  // rows x keys, row stride keys
    bf16* P = w.probs.data();
    // 1. S = Q_block K^T up to the diagonal
    attention_gemm_bf16(false, blk.rows, blk.keys, D, x.q.row(blk.first), x.q.pitch, w.k_t, false,
                        S, blk.keys, {Causal::kLowerC, blk.first});
    // 2. each row: p = exp(scale S - max) over its causal keys in f32, rounded to bf16; 0 past
    // the diagonal
    for (int64_t r = 0; r < blk.rows; ++r) {
      const RowSum row = unnormalised_probs_row(S + r * blk.keys, blk.first + r + 1, blk.keys,
                                                scale, P + r * blk.keys);
      lse_row[blk.first + r] = row.max + std::log(row.sum);
      w.row_factor[static_cast<size_t>(r)] = 1.0f / row.sum;
    }
    // 3. O_block = P V, each query's sum stopping at its last key; out = bf16(O / l)
    attention_gemm_bf16(false, blk.rows, D, blk.keys, P, blk.keys, w.v, false, w.rows.data(), D,
                        {Causal::kLowerA, blk.first});
    store_rows_bf16(w.rows.data(), blk.rows, D, w.row_factor.data(), 1, x.o, blk.first);
  });
}

// bf16 backward of key/value slice kv (batch kv / Hkv, key/value head kv % Hkv): its query heads
// in order, each block by block of queries, the last block first, with the Tensor Core flash
// kernel's rounding: S and dP = dO V^T summed in f32; P = exp(scale S - lse) and dS = P (dP - D_i)
// (D_i = dO_i . O_i of the stored bf16 values) in f32, each rounded to bf16 as an operand; dV =
// sum P^T dO, dQ = scale dS K, dK = scale sum dS^T Q summed in f32 (dK and dV over every block of
// every query head of the group) and rounded to bf16 once.
void attention_kv_slice_backward_bf16(const FlashAttentionShape& g, int64_t kv, const Tensor& qkv,
                                      const Tensor& out, const Tensor& lse, const Tensor& dout,
                                      const Tensor& dqkv, float scale, Bf16Scratch& w) {
  const int64_t Tn = g.T, D = g.D, s0 = kv * g.group();
  const SliceHeads<bf16> x0(g, s0, qkv, out);
  w.k_t.pack(x0.k.row(0), x0.k.pitch, true, D, Tn);
  w.v_t.pack(x0.v.row(0), x0.v.pitch, true, D, Tn);
  w.k.pack(x0.k.row(0), x0.k.pitch, false, Tn, D);
  for (int64_t s = s0; s < s0 + g.group(); ++s) {
    const SliceHeads<bf16> x(g, s, qkv, out), dx(g, s, dqkv, dout);
    const Head<bf16>&q = x.q, &o = x.o, &dO = dx.o;
    const float* lse_row = lse.data<float>() + s * Tn;
    for_each_query_block_from_last(Tn, [&](QueryBlock blk) {
      // dK and dV: written by the first block done (the last) of the group's first query head,
      // added to by every other
      const bool gather = !(s == s0 && blk.keys == Tn);
      const Causal scores_wanted{Causal::kLowerC, blk.first}, keys_seen{Causal::kLowerA, blk.first},
          queries_seeing{Causal::kUpperA, -blk.first};
      float *S = w.scores.data(), *dP = w.dscores.data();
      bf16 *P = w.probs.data(), *dS = w.dprobs.data();
      // the block's rows of O, which only D_i reads (step 2), asked for now so that they arrive
      // during the products of step 1 (waiting on them row by row cost a fifth of this loop)
      for (int64_t r = 0; r < blk.rows; ++r)
        for (int64_t d = 0; d < D; d += 32) __builtin_prefetch(o.row(blk.first + r) + d);
      // 1. S = Q_block K^T and dP = dO_block V^T up to the diagonal
      attention_gemm_bf16(false, blk.rows, blk.keys, D, q.row(blk.first), q.pitch, w.k_t, false, S,
                          blk.keys, scores_wanted);
      attention_gemm_bf16(false, blk.rows, blk.keys, D, dO.row(blk.first), dO.pitch, w.v_t, false,
                          dP, blk.keys, scores_wanted);
      // 2. P and dS up to the diagonal, 0 past it
      for (int64_t r = 0; r < blk.rows; ++r) {
        const float delta = row_dot(dO.row(blk.first + r), o.row(blk.first + r), D);
        const float row_lse = lse_row[blk.first + r];
        const float *s_r = S + r * blk.keys, *dp_r = dP + r * blk.keys;
        bf16 *p_r = P + r * blk.keys, *ds_r = dS + r * blk.keys;
        // one plain loop up to the row's last whole block (where the row has room), the entries
        // past the diagonal then set to 0: nothing here sums across entries, so the run needs no
        // mask, and a loop of variable length vectorises 32 entries at a time (round_row_to_bf16)
        const int64_t seen = blk.first + r + 1,
                      run = whole_blocks(seen) <= blk.keys ? whole_blocks(seen) : seen;
#pragma omp simd
        for (int64_t j = 0; j < run; ++j) {
          const float p = exp_vectorisable(s_r[j] * scale - row_lse);
          p_r[j] = bf16::from_float(p);
          ds_r[j] = bf16::from_float(p * (dp_r[j] - delta));
        }
        std::fill(p_r + seen, p_r + blk.keys, bf16{});
        std::fill(ds_r + seen, ds_r + blk.keys, bf16{});
      }
      // 3. dV[0, keys) += P^T dO_block;  dK[0, keys) += dS^T Q_block (scaled when stored)
      attention_gemm_bf16(true, false, blk.keys, D, blk.rows, P, blk.keys, dO.row(blk.first),
                          dO.pitch, gather, w.dv.data(), D, queries_seeing);
      attention_gemm_bf16(true, false, blk.keys, D, blk.rows, dS, blk.keys, q.row(blk.first),
                          q.pitch, gather, w.dk.data(), D, queries_seeing);
      // 4. dQ_block = scale dS K, rounded once
      attention_gemm_bf16(false, blk.rows, D, blk.keys, dS, blk.keys, w.k, false, w.rows.data(), D,
                          keys_seen);
      store_rows_bf16(w.rows.data(), blk.rows, D, nullptr, scale, dx.q, blk.first);
    });
  }
  const SliceHeads<bf16> dx0(g, s0, dqkv, dout);
  store_rows_bf16(w.dk.data(), Tn, D, nullptr, scale, dx0.k, 0);
  store_rows_bf16(w.dv.data(), Tn, D, nullptr, 1, dx0.v, 0);
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
    // bf16: the products on vdpbf16ps where the core has it (attention_gemm_bf16.cpp)
    const ComputeUnit unit = product_unit<T>();
    launch(cpu_launch_info(kernel, g.slices(), flops, bytes_of({&qkv, &out, &lse}), unit), [&] {
      const bool threaded = worth_threading(g.slices(), g.slices() * Tn * Tn * D);
      parallel_ranges(g.slices(), threaded, [&](int64_t first, int64_t last) {
        if constexpr (std::is_same_v<T, bf16>) {
          Bf16Scratch scratch(Tn, D, false);
          for (int64_t s = first; s < last; ++s)
            attention_slice_forward_bf16(Tn, D, static_cast<float>(scale),
                                         SliceHeads<bf16>(g, s, qkv, out),
                                         lse.data<float>() + s * Tn, scratch);
        } else {
          using C = compute_t<T>;
          std::vector<C> scores(static_cast<size_t>(std::min(kQueryBlock, Tn) * Tn));
          for (int64_t s = first; s < last; ++s)
            attention_slice_forward(Tn, D, scale, SliceHeads<T>(g, s, qkv, out),
                                    lse.data<float>() + s * Tn, scores.data());
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
    const ComputeUnit unit = product_unit<T>();
    launch(cpu_launch_info(kernel, g.slices(), flops, bytes_of({&qkv, &out, &lse, &dout, &dqkv}),
                           unit),
           [&] {
             const bool threaded = worth_threading(g.kv_slices(), g.slices() * Tn * Tn * D);
             parallel_ranges(g.kv_slices(), threaded, [&](int64_t first, int64_t last) {
               if constexpr (std::is_same_v<T, bf16>) {
                 Bf16Scratch scratch(Tn, D, true);
                 for (int64_t kv = first; kv < last; ++kv)
                   attention_kv_slice_backward_bf16(g, kv, qkv, out, lse, dout, dqkv,
                                                    static_cast<float>(scale), scratch);
               } else {
                 using C = compute_t<T>;
                 const size_t scratch = static_cast<size_t>(std::min(kQueryBlock, Tn) * Tn);
                 std::vector<C> probs(scratch), dscores(scratch);
                 // key/value slice kv's query slices are kv * group .. (kv + 1) * group - 1
                 for (int64_t kv = first; kv < last; ++kv)
                   for (int64_t s = kv * g.group(); s < (kv + 1) * g.group(); ++s)
                     attention_slice_backward<T>(
                         Tn, D, s == kv * g.group(), scale, SliceHeads<T>(g, s, qkv, out),
                         SliceHeads<T>(g, s, dqkv, dout), lse.data<float>() + s * Tn, probs.data(),
                         dscores.data());
               }
             });
           });
  });
}

}  // namespace glass::kernels::cpu
