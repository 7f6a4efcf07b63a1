// cpu kernels for LayerNorm over the last dimension: x [N, C], weight and bias [C].
//
//   forward:  mean = sum(x)/C, var = sum((x - mean)^2)/C, rstd = 1/sqrt(var + eps),
//             xhat = (x - mean) * rstd, y = xhat * weight + bias     (mean and rstd saved)
//   backward: dxhat = dy * weight,
//             dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
//             dweight = sum over rows of dy * xhat, dbias = sum over rows of dy
//
// Rows are independent and run in parallel. The variance is taken around the mean in a second
// pass (no cancellation from sum(x^2) - mean^2). dweight and dbias are sums over rows: each fixed
// chunk of kRowsPerChunk rows writes its own partial sums, and the chunks are then added in chunk
// order, so the result is bit-identical whatever the number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

constexpr int64_t kRowsPerChunk = 32;

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, double eps) {
  const char* kernel = "layernorm_forward";
  const LayerNormShape g(kernel, x, {&x, &y}, {&mean, &rstd}, {&weight, &bias});
  const double bytes = bytes_of({&x, &y, &weight, &bias, &mean, &rstd});
  // per element: 1 (mean) + 3 (variance) + 4 (normalise, scale, shift)
  const double flops = 8.0 * static_cast<double>(x.numel());
  visit_float(x.dtype(), kernel, [&]<class T>() {
    const T* xp = x.data<T>();
    const T* w = weight.data<T>();
    const T* b = bias.data<T>();
    T* yp = y.data<T>();
    T* mp = mean.data<T>();
    T* rp = rstd.data<T>();
    const int64_t C = g.C;
    launch(cpu_launch_info(kernel, g.rows, flops, bytes), [&] {
      for_each_row(g.rows, x.numel(), [&](int64_t r) {
        const T* xr = xp + r * C;
        T* yr = yp + r * C;
        // 1. mean, then the variance around it
        const T m = row_sum(xr, C) / static_cast<T>(C);
        T var = 0;
#pragma omp simd reduction(+ : var)
        for (int64_t j = 0; j < C; ++j) var += (xr[j] - m) * (xr[j] - m);
        const T rs = T(1) / std::sqrt(var / static_cast<T>(C) + static_cast<T>(eps));
        // 2. normalise, scale and shift
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - m) * rs * w[j] + b[j];
        mp[r] = m;
        rp[r] = rs;
      });
    });
  });
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                        const Tensor& dbias) {
  const char* kernel = "layernorm_backward";
  const LayerNormShape g(kernel, x, {&x, &dy, &dx}, {&mean, &rstd}, {&weight, &dweight, &dbias});
  const double bytes = bytes_of({&dy, &x, &weight, &mean, &rstd, &dx, &dweight, &dbias});
  // per element: 2 (xhat) + 1 (dxhat) + 3 (the two means) + 4 (dx) + 3 (dweight, dbias)
  const double flops = 13.0 * static_cast<double>(x.numel());
  const int64_t chunks = (g.rows + kRowsPerChunk - 1) / kRowsPerChunk;
  visit_float(x.dtype(), kernel, [&]<class T>() {
    const T* dyp = dy.data<T>();
    const T* xp = x.data<T>();
    const T* w = weight.data<T>();
    const T* mp = mean.data<T>();
    const T* rp = rstd.data<T>();
    T* dxp = dx.data<T>();
    T* dw = dweight.data<T>();
    T* db = dbias.data<T>();
    const int64_t C = g.C;
    launch(cpu_launch_info(kernel, g.rows, flops, bytes), [&] {
      // partial[c] holds chunk c's dweight sums, then its dbias sums (2 * C values)
      std::vector<T> partial(static_cast<size_t>(chunks * 2 * C));
      for_each_row(chunks, x.numel(), [&](int64_t c) {
        T* pw = partial.data() + c * 2 * C;
        T* pb = pw + C;
        for (int64_t j = 0; j < 2 * C; ++j) pw[j] = 0;
        const int64_t end = std::min(g.rows, (c + 1) * kRowsPerChunk);
        for (int64_t r = c * kRowsPerChunk; r < end; ++r) {
          const T* dyr = dyp + r * C;
          const T* xr = xp + r * C;
          T* dxr = dxp + r * C;
          const T m = mp[r], rs = rp[r];
          // 1. mean(dxhat) and mean(dxhat * xhat), with dxhat = dy * w, xhat = (x - mean) * rstd
          T sum_dxhat = 0, sum_dxhat_xhat = 0;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
          for (int64_t j = 0; j < C; ++j) {
            const T dxhat = dyr[j] * w[j];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * (xr[j] - m) * rs;
          }
          const T mean_dxhat = sum_dxhat / static_cast<T>(C);
          const T mean_dxhat_xhat = sum_dxhat_xhat / static_cast<T>(C);
          // 2. dx, and this row's share of dweight and dbias
#pragma omp simd
          for (int64_t j = 0; j < C; ++j) {
            const T xhat = (xr[j] - m) * rs;
            dxr[j] = rs * (dyr[j] * w[j] - mean_dxhat - xhat * mean_dxhat_xhat);
            pw[j] += dyr[j] * xhat;
            pb[j] += dyr[j];
          }
        }
      });
      // 3. add the chunks' partial sums in chunk order
      for (int64_t j = 0; j < C; ++j) dw[j] = db[j] = 0;
      for (int64_t c = 0; c < chunks; ++c) {
        const T* pw = partial.data() + c * 2 * C;
        const T* pb = pw + C;
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) {
          dw[j] += pw[j];
          db[j] += pb[j];
        }
      }
    });
  });
}

}  // namespace glass::kernels::cpu
