// cpu kernels for RMSNorm over the last dimension (Llama): x [N, C], weight [C], rstd [N], and the
// fused residual add + RMSNorm of a Llama block (residual = x + delta, then RMSNorm of it).
//
//   forward:  rstd = 1/sqrt(sum(x^2)/C + eps), xhat = x * rstd, y = xhat * weight   (rstd saved)
//   backward: dxhat = dy * weight, dx = rstd * (dxhat - xhat * mean(dxhat * xhat)),
//             dweight = sum over rows of dy * xhat
//   fused residual: forward first stores residual = x + delta and normalises it; backward adds
//             the gradient that reached the residual itself: dx = dresidual + (the dx above).
//
// LayerNorm without the centring and the bias (kernels/cpu/layernorm.cpp, whose structure this
// follows): rows run in parallel, the forward's four at a time (norm_rows.h); dweight is a sum over
// rows, taken as fixed chunks of kRmsRowsPerChunk rows that each write their own partial sums,
// added afterwards in chunk order, so the result is bit-identical whatever the number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/costs/norms.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/norm_rows.h"

namespace glass::kernels::cpu {

namespace {

constexpr int64_t kRmsRowsPerChunk = 32;

// Rows [first, first + kRows) of the forward (norm_rows.h: their sums side by side): residual = x
// + delta when delta is given (then the rows normalised are residual's), y = RMSNorm(rows), rstd
// saved. Plain pointers, as layernorm_forward_group.
template <int kRows, class T, class A = compute_t<T>>
void rmsnorm_forward_group(const T* x, const T* delta, T* residual, const T* w, T* y, A* rstd,
                           int64_t C, A eps, int64_t first) {
  const T* row[kRows];
  rows_to_normalise(x, delta, residual, C, first, row);
  // 1. the mean square
  A square_sum[kRows];
  row_group_sums<kRows>(
      C,
      [&](int q, int64_t j) {
        const A v = to_compute(row[q][j]);
        return v * v;
      },
      square_sum);
  // 2. normalise and scale
  for (int q = 0; q < kRows; ++q) {
    const A rs = A(1) / std::sqrt(square_sum[q] / static_cast<A>(C) + eps);
    const T* xr = row[q];
    T* yr = y + (first + q) * C;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j)
      yr[j] = from_compute<T>(to_compute(xr[j]) * rs * to_compute(w[j]));
    rstd[first + q] = rs;
  }
}

// residual = x + delta when delta is given (then the rows normalised are residual's), y =
// RMSNorm(rows), rstd saved.
void rmsnorm_forward_rows(const char* kernel, const Tensor& x, const Tensor* delta,
                          const Tensor* residual, const Tensor& weight, const Tensor& y,
                          const Tensor& rstd, double eps) {
  const LayerNormShape g(kernel, x, {&x, &y}, {&rstd}, {&weight});
  if (delta) (void)LayerNormShape(kernel, x, {delta, residual}, {}, {});
  const LaunchCost cost = rmsnorm_forward_cost(x, delta, residual, weight, y, rstd);
  visit_element(x, kernel, [&]<class T>() {
    using A = compute_t<T>;  // rstd's type and the math's (kernels/cpu/element.h)
    const T* xp = x.data<T>();
    const T* dp = delta ? delta->data<T>() : nullptr;
    T* sp = delta ? residual->data<T>() : nullptr;
    const T* w = weight.data<T>();
    T* yp = y.data<T>();
    A* rp = rstd.data<A>();
    const int64_t C = g.C;
    launch(cpu_launch_info(kernel, g.rows, cost.flops, cost.bytes), [&] {
      for_each_norm_group(g.rows, x.numel(), [&]<int kRows>(int64_t first) {
        rmsnorm_forward_group<kRows>(xp, dp, sp, w, yp, rp, C, static_cast<A>(eps), first);
      });
    });
  });
}

// One row of RMSNorm's backward: its dx (plus dresidual's row when given), and its share of
// dweight added to dw. Plain pointers, as layernorm_backward_row (the captured pointers of a
// lambda were reloaded in every vectorised iteration).
template <class T, class A = compute_t<T>>
void rmsnorm_backward_row(const T* dy, const T* dresidual, const T* x, const T* w, A rstd,
                          int64_t C, T* dx, A* dw) {
  // 1. mean(dxhat * xhat), with dxhat = dy * w, xhat = x * rstd
  A sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat_xhat)
  for (int64_t j = 0; j < C; ++j)
    sum_dxhat_xhat += to_compute(dy[j]) * to_compute(w[j]) * to_compute(x[j]) * rstd;
  const A mean_dxhat_xhat = sum_dxhat_xhat / static_cast<A>(C);
  // 2. dx (plus the residual's own gradient), and this row's share of dweight
#pragma omp simd
  for (int64_t j = 0; j < C; ++j) {
    const A xhat = to_compute(x[j]) * rstd;
    const A dyj = to_compute(dy[j]);
    const A dxj = rstd * (dyj * to_compute(w[j]) - xhat * mean_dxhat_xhat);
    dx[j] = from_compute<T>(dresidual ? to_compute(dresidual[j]) + dxj : dxj);
    dw[j] += dyj * xhat;
  }
}

// dx = RMSNorm's backward (+ dresidual when given), dweight.
void rmsnorm_backward_rows(const char* kernel, const Tensor& dy, const Tensor* dresidual,
                           const Tensor& x, const Tensor& weight, const Tensor& rstd,
                           const Tensor& dx, const Tensor& dweight) {
  const LayerNormShape g(kernel, x, {&x, &dy, &dx}, {&rstd}, {&weight, &dweight});
  if (dresidual) (void)LayerNormShape(kernel, x, {dresidual}, {}, {});
  // the row pass, and dweight written from the chunks' partial sums in cache
  LaunchCost cost = rmsnorm_backward_rows_cost(dy, dresidual, x, weight, rstd, dx);
  cost.bytes += bytes_of({&dweight});
  const int64_t chunks = (g.rows + kRmsRowsPerChunk - 1) / kRmsRowsPerChunk;
  visit_element(x, kernel, [&]<class T>() {
    using A = compute_t<T>;
    const T* dyp = dy.data<T>();
    const T* drp = dresidual ? dresidual->data<T>() : nullptr;
    const T* xp = x.data<T>();
    const T* w = weight.data<T>();
    const A* rp = rstd.data<A>();
    T* dxp = dx.data<T>();
    T* dw = dweight.data<T>();
    const int64_t C = g.C;
    launch(cpu_launch_info(kernel, g.rows, cost.flops, cost.bytes), [&] {
      // partial[c] holds chunk c's dweight sums (C values)
      std::vector<A> partial(static_cast<size_t>(chunks * C));
      for_each_row(chunks, x.numel(), [&](int64_t c) {
        A* pw = partial.data() + c * C;
        std::fill(pw, pw + C, A(0));
        const int64_t end = std::min(g.rows, (c + 1) * kRmsRowsPerChunk);
        for (int64_t r = c * kRmsRowsPerChunk; r < end; ++r)
          rmsnorm_backward_row(dyp + r * C, drp ? drp + r * C : nullptr, xp + r * C, w, rp[r], C,
                               dxp + r * C, pw);
      });
      // 3. add the chunks' partial sums in chunk order, rounded once
      std::vector<A> sum(static_cast<size_t>(C), A(0));
      for (int64_t c = 0; c < chunks; ++c) {
        const A* pw = partial.data() + c * C;
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) sum[j] += pw[j];
      }
      for (int64_t j = 0; j < C; ++j) dw[j] = from_compute<T>(sum[j]);
    });
  });
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd,
                     double eps) {
  rmsnorm_forward_rows("rmsnorm_forward", x, nullptr, nullptr, weight, y, rstd, eps);
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, const Tensor& dweight) {
  rmsnorm_backward_rows("rmsnorm_backward", dy, nullptr, x, weight, rstd, dx, dweight);
}

void residual_rmsnorm_forward(const Tensor& x, const Tensor& delta, const Tensor& weight,
                              const Tensor& residual, const Tensor& y, const Tensor& rstd,
                              double eps) {
  rmsnorm_forward_rows("residual_rmsnorm_forward", x, &delta, &residual, weight, y, rstd, eps);
}

void residual_rmsnorm_backward(const Tensor& dy, const Tensor& dresidual, const Tensor& residual,
                               const Tensor& weight, const Tensor& rstd, const Tensor& dx,
                               const Tensor& dweight) {
  rmsnorm_backward_rows("residual_rmsnorm_backward", dy, &dresidual, residual, weight, rstd, dx,
                        dweight);
}

}  // namespace glass::kernels::cpu
