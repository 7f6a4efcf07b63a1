// cpu kernels for LayerNorm over the last dimension: x [N, C], weight and bias [C], and the fused
// residual add + LayerNorm of a transformer block (residual = x + delta, then LayerNorm of it).
//
//   forward:  mean = sum(x)/C, var = sum((x - mean)^2)/C, rstd = 1/sqrt(var + eps),
//             xhat = (x - mean) * rstd, y = xhat * weight + bias     (mean and rstd saved)
//   backward: dxhat = dy * weight,
//             dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
//             dweight = sum over rows of dy * xhat, dbias = sum over rows of dy
//   fused residual: forward first stores residual = x + delta and normalises it; backward adds the
//             gradient that reached the residual itself: dx = dresidual + (the dx above), the
//             gradient of both x and delta.
//
// Rows are independent and run in parallel, the forward's four at a time with their sums side by
// side (norm_rows.h). The variance is taken around the mean in a second pass (no cancellation from
// sum(x^2) - mean^2). dweight and dbias are sums over rows: each fixed chunk of kRowsPerChunk rows
// writes its own partial sums, and the chunks are then added in chunk order, so the result is
// bit-identical whatever the number of threads. The plain and the fused
// entries are one code path: the fused one passes delta/residual (forward) and dresidual
// (backward), which the plain one leaves null. Templated on the stored type T (f32, bf16, f64):
// mean and rstd are accum_dtype (f32 for bf16), the math, the sums and the chunks' partial sums
// run in compute_t<T>, and each stored element is rounded once (kernels/cpu/element.h); the
// residual is normalised as stored (rounded), as on emu and cuda.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/costs/norms.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/norm_rows.h"

namespace glass::kernels::cpu {

namespace {

constexpr int64_t kRowsPerChunk = 32;

// Rows [first, first + kRows) of the forward (norm_rows.h: their sums side by side): residual = x
// + delta when delta is given (then the rows normalised are residual's), y = LayerNorm(rows), mean
// and rstd saved. A function of plain pointers (layernorm_backward_row says why).
template <int kRows, class T, class A = compute_t<T>>
void layernorm_forward_group(const T* x, const T* delta, T* residual, const T* w, const T* b, T* y,
                             A* mean, A* rstd, int64_t C, A eps, int64_t first) {
  const T* row[kRows];
  rows_to_normalise(x, delta, residual, C, first, row);
  // 1. mean, then the variance around it
  A sum[kRows], m[kRows], square_sum[kRows];
  row_group_sums<kRows>(
      C, [&](int q, int64_t j) { return to_compute(row[q][j]); }, sum);
  for (int q = 0; q < kRows; ++q) m[q] = sum[q] / static_cast<A>(C);
  row_group_sums<kRows>(
      C,
      [&](int q, int64_t j) {
        const A centred = to_compute(row[q][j]) - m[q];
        return centred * centred;
      },
      square_sum);
  // 2. normalise, scale and shift
  for (int q = 0; q < kRows; ++q) {
    const A rs = A(1) / std::sqrt(square_sum[q] / static_cast<A>(C) + eps);
    const T* xr = row[q];
    T* yr = y + (first + q) * C;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j)
      yr[j] =
          from_compute<T>((to_compute(xr[j]) - m[q]) * rs * to_compute(w[j]) + to_compute(b[j]));
    mean[first + q] = m[q];
    rstd[first + q] = rs;
  }
}

// residual = x + delta when delta is given (then the rows normalised are residual's), y =
// LayerNorm(rows), mean and rstd saved.
void layernorm_forward_rows(const char* kernel, const Tensor& x, const Tensor* delta,
                            const Tensor* residual, const Tensor& weight, const Tensor& bias,
                            const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps) {
  const LayerNormShape g(kernel, x, {&x, &y}, {&mean, &rstd}, {&weight, &bias});
  if (delta) (void)LayerNormShape(kernel, x, {delta, residual}, {}, {});
  const LaunchCost cost = layernorm_forward_cost(x, delta, residual, weight, bias, y, mean, rstd);
  visit_element(x, kernel, [&]<class T>() {
    using A = compute_t<T>;
    const T* xp = x.data<T>();
    const T* dp = delta ? delta->data<T>() : nullptr;
    T* sp = delta ? residual->data<T>() : nullptr;
    const T* w = weight.data<T>();
    const T* b = bias.data<T>();
    T* yp = y.data<T>();
    A* mp = mean.data<A>();
    A* rp = rstd.data<A>();
    const int64_t C = g.C;
    launch(cpu_launch_info(kernel, g.rows, cost.flops, cost.bytes), [&] {
      for_each_norm_group(g.rows, x.numel(), [&]<int kRows>(int64_t first) {
        layernorm_forward_group<kRows>(xp, dp, sp, w, b, yp, mp, rp, C, static_cast<A>(eps), first);
      });
    });
  });
}

// One row of LayerNorm's backward: its dx (plus dresidual's row when given), and its share of
// dweight and dbias added to dw and db. A function of plain pointers: inside the row loop's lambda
// the compiler reloaded the captured pointers in every vectorised iteration, as gathers.
// dw and db are the chunk's partial sums, in compute_t<T>.
template <class T, class A = compute_t<T>>
void layernorm_backward_row(const T* dy, const T* dresidual, const T* x, const T* w, A mean, A rstd,
                            int64_t C, T* dx, A* dw, A* db) {
  // 1. mean(dxhat) and mean(dxhat * xhat), with dxhat = dy * w, xhat = (x - mean) * rstd
  A sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
  for (int64_t j = 0; j < C; ++j) {
    const A dxhat = to_compute(dy[j]) * to_compute(w[j]);
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * (to_compute(x[j]) - mean) * rstd;
  }
  const A mean_dxhat = sum_dxhat / static_cast<A>(C);
  const A mean_dxhat_xhat = sum_dxhat_xhat / static_cast<A>(C);
  // 2. dx (plus the residual's own gradient), and this row's share of dweight and dbias
#pragma omp simd
  for (int64_t j = 0; j < C; ++j) {
    const A xhat = (to_compute(x[j]) - mean) * rstd;
    const A dyj = to_compute(dy[j]);
    const A dxj = rstd * (dyj * to_compute(w[j]) - mean_dxhat - xhat * mean_dxhat_xhat);
    dx[j] = from_compute<T>(dresidual ? to_compute(dresidual[j]) + dxj : dxj);
    dw[j] += dyj * xhat;
    db[j] += dyj;
  }
}

// dx = LayerNorm's backward (+ dresidual when given), dweight, dbias.
void layernorm_backward_rows(const char* kernel, const Tensor& dy, const Tensor* dresidual,
                             const Tensor& x, const Tensor& weight, const Tensor& mean,
                             const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                             const Tensor& dbias) {
  const LayerNormShape g(kernel, x, {&x, &dy, &dx}, {&mean, &rstd}, {&weight, &dweight, &dbias});
  if (dresidual) (void)LayerNormShape(kernel, x, {dresidual}, {}, {});
  // the row pass, and dweight and dbias written from the chunks' partial sums in cache
  LaunchCost cost = layernorm_backward_rows_cost(dy, dresidual, x, weight, mean, rstd, dx);
  cost.bytes += bytes_of({&dweight, &dbias});
  const int64_t chunks = (g.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  visit_element(x, kernel, [&]<class T>() {
    using A = compute_t<T>;
    const T* dyp = dy.data<T>();
    const T* drp = dresidual ? dresidual->data<T>() : nullptr;
    const T* xp = x.data<T>();
    const T* w = weight.data<T>();
    const A* mp = mean.data<A>();
    const A* rp = rstd.data<A>();
    T* dxp = dx.data<T>();
    T* dw = dweight.data<T>();
    T* db = dbias.data<T>();
    const int64_t C = g.C;
    launch(cpu_launch_info(kernel, g.rows, cost.flops, cost.bytes), [&] {
      // partial[c] holds chunk c's dweight sums, then its dbias sums (2 * C values)
      std::vector<A> partial(static_cast<size_t>(chunks * 2 * C));
      for_each_row(chunks, x.numel(), [&](int64_t c) {
        A* pw = partial.data() + c * 2 * C;
        A* pb = pw + C;
        for (int64_t j = 0; j < 2 * C; ++j) pw[j] = 0;
        const int64_t end = std::min(g.rows, (c + 1) * kRowsPerChunk);
        for (int64_t r = c * kRowsPerChunk; r < end; ++r)
          layernorm_backward_row(dyp + r * C, drp ? drp + r * C : nullptr, xp + r * C, w, mp[r],
                                 rp[r], C, dxp + r * C, pw, pb);
      });
      // 3. add the chunks' partial sums in chunk order, column by column, rounded once
      std::vector<A> sum_w(static_cast<size_t>(C), A(0)), sum_b(static_cast<size_t>(C), A(0));
      for (int64_t c = 0; c < chunks; ++c) {
        const A* pw = partial.data() + c * 2 * C;
        const A* pb = pw + C;
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) {
          sum_w[j] += pw[j];
          sum_b[j] += pb[j];
        }
      }
      for (int64_t j = 0; j < C; ++j) {
        dw[j] = from_compute<T>(sum_w[j]);
        db[j] = from_compute<T>(sum_b[j]);
      }
    });
  });
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, double eps) {
  layernorm_forward_rows("layernorm_forward", x, nullptr, nullptr, weight, bias, y, mean, rstd,
                         eps);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                        const Tensor& dbias) {
  layernorm_backward_rows("layernorm_backward", dy, nullptr, x, weight, mean, rstd, dx, dweight,
                          dbias);
}

void residual_layernorm_forward(const Tensor& x, const Tensor& delta, const Tensor& weight,
                                const Tensor& bias, const Tensor& residual, const Tensor& y,
                                const Tensor& mean, const Tensor& rstd, double eps) {
  layernorm_forward_rows("residual_layernorm_forward", x, &delta, &residual, weight, bias, y, mean,
                         rstd, eps);
}

void residual_layernorm_backward(const Tensor& dy, const Tensor& dresidual, const Tensor& residual,
                                 const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  layernorm_backward_rows("residual_layernorm_backward", dy, &dresidual, residual, weight, mean,
                          rstd, dx, dweight, dbias);
}

}  // namespace glass::kernels::cpu
