// cpu kernels of the flash attention entries (contract in kernels/backend.h): causal attention
// read straight from qkv [B, T, 3C], out [B, T, C], lse [B, H, T], with no T x T buffer.
//
//   S_ij = q_i . k_j * scale (j <= i);  lse_i = log sum_j exp(S_ij);  P_ij = exp(S_ij - lse_i)
//   out_i = sum_j P_ij v_j
//   backward: D_i = dO_i . O_i;  dS_ij = P_ij (dO_i . v_j - D_i)
//             dq_i = scale sum_j dS_ij k_j;  dk_j = scale sum_i dS_ij q_i;  dv_j = sum_i P_ij dO_i
//
// Row by row on a scratch row of T scores per thread, the (batch, head) slices in parallel: each
// slice writes only its own head's columns, so slices never share an output element and each
// element is summed in a fixed order (deterministic). The cpu's default attention stays the
// probs-based kernel (kernels/cpu/attention.cpp, OpenBLAS GEMMs); these entries exist so the flash
// path runs on every device, and take any D and f64 (gradcheck).
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// One slice's rows: element (t, d) of q, k, v, out, dout, dq, dk, dv at row t * pitch + d.
template <class T>
struct Head {
  T* base;
  int64_t pitch;
  T* row(int64_t t) const { return base + t * pitch; }
};

}  // namespace

void flash_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, double scale) {
  const char* kernel = "flash_attention_forward";
  const FlashAttentionShape g(kernel, qkv, n_head, {}, {&out}, lse);
  if (qkv.numel() == 0) return;
  const double entries = static_cast<double>(g.slices()) * static_cast<double>(g.T * (g.T + 1) / 2);
  visit_float(qkv, kernel, [&]<class T>() {
    const int64_t Tn = g.T, C = g.C, D = g.D;
    launch(
        cpu_launch_info(kernel, g.slices(), entries * (4.0 * D + 5), bytes_of({&qkv, &out, &lse})),
        [&] {
#pragma omp parallel if (worth_threading(g.slices(), g.slices() * Tn * Tn * D))
          {
            std::vector<T> p(static_cast<size_t>(Tn));  // this thread's row of scores
#pragma omp for schedule(static)
            for (int64_t s = 0; s < g.slices(); ++s) {
              const int64_t b = s / g.H, h = s % g.H;
              T* base = qkv.data<T>() + b * Tn * 3 * C + h * D;
              const Head<T> q{base, 3 * C}, k{base + C, 3 * C}, v{base + 2 * C, 3 * C};
              const Head<T> o{out.data<T>() + b * Tn * C + h * D, C};
              float* lse_row = lse.data<float>() + s * Tn;
              for (int64_t i = 0; i < Tn; ++i) {
                // 1. S_ij for j <= i and their max
                for (int64_t j = 0; j <= i; ++j) p[j] = row_dot(q.row(i), k.row(j), D) * T(scale);
                const T m = row_max(p.data(), i + 1);
                // 2. exp(S_ij - m) and their sum l; lse_i = m + log l
                T l = 0;
                for (int64_t j = 0; j <= i; ++j) {
                  p[j] = std::exp(p[j] - m);
                  l += p[j];
                }
                lse_row[i] = static_cast<float>(m + std::log(l));
                // 3. out_i = sum_j exp(S_ij - m) v_j / l
                T* oi = o.row(i);
                for (int64_t d = 0; d < D; ++d) oi[d] = 0;
                for (int64_t j = 0; j <= i; ++j) {
                  const T w = p[j] / l;
                  const T* vj = v.row(j);
#pragma omp simd
                  for (int64_t d = 0; d < D; ++d) oi[d] += w * vj[d];
                }
              }
            }
          }
        });
  });
}

void flash_attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                              const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                              double scale) {
  const char* kernel = "flash_attention_backward";
  const FlashAttentionShape g(kernel, qkv, n_head, {&dqkv}, {&out, &dout}, lse);
  if (qkv.numel() == 0) return;
  const double entries = static_cast<double>(g.slices()) * static_cast<double>(g.T * (g.T + 1) / 2);
  visit_float(qkv, kernel, [&]<class T>() {
    const int64_t Tn = g.T, C = g.C, D = g.D;
    launch(cpu_launch_info(kernel, g.slices(), entries * (10.0 * D + 4),
                           bytes_of({&qkv, &out, &lse, &dout, &dqkv})),
           [&] {
             for_each_row(g.slices(), g.slices() * Tn * Tn * D, [&](int64_t s) {
               const int64_t b = s / g.H, h = s % g.H;
               const int64_t at = b * Tn * 3 * C + h * D;
               T* base = qkv.data<T>() + at;
               T* dbase = dqkv.data<T>() + at;
               const Head<T> q{base, 3 * C}, k{base + C, 3 * C}, v{base + 2 * C, 3 * C};
               const Head<T> dq{dbase, 3 * C}, dk{dbase + C, 3 * C}, dv{dbase + 2 * C, 3 * C};
               const Head<T> o{out.data<T>() + b * Tn * C + h * D, C};
               const Head<T> dO{dout.data<T>() + b * Tn * C + h * D, C};
               const float* lse_row = lse.data<float>() + s * Tn;
               for (int64_t t = 0; t < Tn; ++t)
                 for (int64_t d = 0; d < D; ++d) dq.row(t)[d] = dk.row(t)[d] = dv.row(t)[d] = 0;
               for (int64_t i = 0; i < Tn; ++i) {
                 // 1. D_i = dO_i . O_i
                 const T delta = row_dot(dO.row(i), o.row(i), D);
                 for (int64_t j = 0; j <= i; ++j) {
                   // 2. P_ij recomputed from lse; dS_ij = P_ij (dO_i . v_j - D_i)
                   const T p = std::exp(row_dot(q.row(i), k.row(j), D) * T(scale) - T(lse_row[i]));
                   const T ds = p * (row_dot(dO.row(i), v.row(j), D) - delta);
                   // 3. the three sums, each in increasing i then j
                   T *dqi = dq.row(i), *dkj = dk.row(j), *dvj = dv.row(j);
                   const T *qi = q.row(i), *kj = k.row(j), *doi = dO.row(i);
#pragma omp simd
                   for (int64_t d = 0; d < D; ++d) {
                     dqi[d] += ds * kj[d];
                     dkj[d] += ds * qi[d];
                     dvj[d] += p * doi[d];
                   }
                 }
               }
               // 4. the scale of dQ and dK
               for (int64_t t = 0; t < Tn; ++t)
                 for (int64_t d = 0; d < D; ++d) {
                   dq.row(t)[d] *= T(scale);
                   dk.row(t)[d] *= T(scale);
                 }
             });
           });
  });
}

}  // namespace glass::kernels::cpu
