// CUDA kernels for RMSNorm over the last dimension (Llama): x [N, C], weight [C], rstd [N]
// (contracts in kernels/kernel_list.inc; the cpu reference is kernels/cpu/rmsnorm.cpp), and the
// fused residual add + RMSNorm of a Llama block.
//
//   forward:  rstd = 1/sqrt(sum(x^2)/C + eps), xhat = x * rstd, y = xhat * weight   (rstd saved)
//   backward: dxhat = dy * weight, dx = rstd * (dxhat - xhat * mean(dxhat * xhat)),
//             dweight = sum over rows of dy * xhat
//   fused residual (residual_rmsnorm_*): forward reads x and delta once, stores residual = x +
//             delta (rounded to T) and normalises the stored values, in the same block; backward
//             writes dx = dresidual + (the dx above), the gradient of both x and delta.
//
// LayerNorm without the centring and the bias, and the same thread mapping as
// kernels/cuda/layernorm.cu. Forward: one block per row, its threads striding over the C columns
// in 16-byte vectors (vector_row.h), one block reduction (warp butterfly shuffles, then the warps
// in warp order) for the sum of squares; the second pass reads back what the same thread read in
// the first. Backward: one block per chunk of kRowsPerChunk rows, walked in order: one block
// reduction for the row's mean(dxhat * xhat), then each thread writes dx for its columns and adds
// dy * xhat into the chunk's partial dweight, a scratch buffer [chunks, C] in device memory where
// each column belongs to one thread (no race, no atomics). dweight is then those partials added
// column by column in chunk order (chunk_column_sums.h, as LayerNorm's). Every order is fixed by
// the code, so the results are bit-identical run to run. Elements are f32 or bf16, with f32
// statistics, sums and partial gradients either way. The plain and the fused launchers run the same
// kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/costs/norms.h"
#include "kernels/cuda/chunk_column_sums.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/vector_row.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kRmsMaxThreadsPerRow = 512;
constexpr int64_t kRmsRowsPerChunk = 32;

// One block per row r. With delta (and residual) given, the row normalised is residual = x + delta.
template <class T>
__global__ void rmsnorm_forward_kernel(const T* x, const T* delta, T* residual, const T* weight,
                                       T* y, float* rstd, int64_t C, float eps) {
  constexpr int W = kVecWidth<T>;
  const int64_t r = blockIdx.x;
  const T* xr = x + r * C;
  T* yr = y + r * C;
  const T* dr = delta != nullptr ? delta + r * C : nullptr;
  T* sr = delta != nullptr ? residual + r * C : nullptr;
  const RowSplit split = split_row(C, xr, yr, weight, dr, sr);
  // 0. the residual add, stored rounded to T: the values normalised below are the stored ones
  if (delta != nullptr) {
    walk_row<T>(
        split, C,
        [&](int64_t j) { sr[j] = from_compute<T>(to_compute(xr[j]) + to_compute(dr[j])); },
        [&](int64_t j) {
          const Vec<T> a = load_vec(xr + j), d = load_vec(dr + j);
          Vec<T> o;
          for (int k = 0; k < W; ++k)
            o.v[k] = from_compute<T>(to_compute(a.v[k]) + to_compute(d.v[k]));
          store_vec(sr + j, o);
        });
    xr = sr;  // each thread reads back only the columns it wrote: no barrier needed
  }
  // 1. the mean square
  float s = 0;
  for_each_column(xr, split, C, [&](int64_t, T xj) { s += to_compute(xj) * to_compute(xj); });
  const float rs = 1.0f / sqrtf(block_reduce(s, Sum{}) / static_cast<float>(C) + eps);
  // 2. normalise and scale
  auto normalise = [&](T xj, T wj) {
    return from_compute<T>(to_compute(xj) * rs * to_compute(wj));
  };
  walk_row<T>(
      split, C, [&](int64_t j) { yr[j] = normalise(xr[j], weight[j]); },
      [&](int64_t j) {
        const Vec<T> a = load_vec(xr + j), w = load_vec(weight + j);
        Vec<T> o;
        for (int k = 0; k < W; ++k) o.v[k] = normalise(a.v[k], w.v[k]);
        store_vec(yr + j, o);
      });
  if (threadIdx.x == 0) rstd[r] = rs;
}

// One block per chunk of kRmsRowsPerChunk rows: dx for its rows (plus dresidual when given), and
// the chunk's partial dweight sums partial[chunk] (f32, C values). Column j of the partials
// belongs to one thread for all the chunk's rows, so every row has the same split: vectors from
// column 0 (`vectorised`: C a multiple of the vector width and every array 16-byte aligned,
// checked by the launcher), or the whole row scalar.
template <class T>
__global__ void rmsnorm_backward_kernel(const T* dy, const T* dresidual, const T* x,
                                        const T* weight, const float* rstd, T* dx, float* partial,
                                        int64_t rows, int64_t C, bool vectorised) {
  constexpr int W = kVecWidth<T>;
  const RowSplit split = vectorised ? RowSplit{0, C / W} : RowSplit{C, 0};
  float* pw = partial + static_cast<int64_t>(blockIdx.x) * C;
  walk_row<T>(
      split, C, [&](int64_t j) { pw[j] = 0; },
      [&](int64_t j) {
        for (int k = 0; k < W; ++k) pw[j + k] = 0;
      });
  const int64_t first = blockIdx.x * kRmsRowsPerChunk;
  const int64_t end = first + kRmsRowsPerChunk < rows ? first + kRmsRowsPerChunk : rows;
  for (int64_t r = first; r < end; ++r) {
    const T* dyr = dy + r * C;
    const T* xr = x + r * C;
    T* dxr = dx + r * C;
    const T* drr = dresidual != nullptr ? dresidual + r * C : nullptr;
    const float rs = rstd[r];
    // 1. mean(dxhat * xhat), with dxhat = dy * w, xhat = x * rstd
    float sum_dxhat_xhat = 0;
    auto add_sum = [&](T dyj, T xj, T wj) {
      sum_dxhat_xhat += to_compute(dyj) * to_compute(wj) * to_compute(xj) * rs;
    };
    walk_row<T>(
        split, C, [&](int64_t j) { add_sum(dyr[j], xr[j], weight[j]); },
        [&](int64_t j) {
          const Vec<T> d = load_vec(dyr + j), a = load_vec(xr + j), w = load_vec(weight + j);
          for (int k = 0; k < W; ++k) add_sum(d.v[k], a.v[k], w.v[k]);
        });
    const float mean_dxhat_xhat = block_reduce(sum_dxhat_xhat, Sum{}) / static_cast<float>(C);
    // 2. dx (plus the residual's own gradient, rounded once), and this row's share of the chunk's
    //    dweight (column j is this thread's)
    auto dx_of = [&](int64_t j, T dyv, T xv, T wv, float dres) {
      const float xhat = to_compute(xv) * rs;
      const float dyj = to_compute(dyv);
      const float dxj = rs * (dyj * to_compute(wv) - xhat * mean_dxhat_xhat);
      pw[j] += dyj * xhat;
      return from_compute<T>(drr != nullptr ? dres + dxj : dxj);
    };
    walk_row<T>(
        split, C,
        [&](int64_t j) {
          dxr[j] = dx_of(j, dyr[j], xr[j], weight[j], drr != nullptr ? to_compute(drr[j]) : 0.0f);
        },
        [&](int64_t j) {
          const Vec<T> d = load_vec(dyr + j), a = load_vec(xr + j), w = load_vec(weight + j);
          Vec<T> res{}, o;
          if (drr != nullptr) res = load_vec(drr + j);
          for (int k = 0; k < W; ++k)
            o.v[k] =
                dx_of(j + k, d.v[k], a.v[k], w.v[k], drr != nullptr ? to_compute(res.v[k]) : 0.0f);
          store_vec(dxr + j, o);
        });
  }
}

// ---------------------------------------------------------------------------------------------
// Host side.

// residual = x + delta when delta is given, y = RMSNorm of the rows, rstd saved.
void launch_rmsnorm_forward(const char* kernel, const Tensor& x, const Tensor* delta,
                            const Tensor* residual, const Tensor& weight, const Tensor& y,
                            const Tensor& rstd, double eps) {
  const LayerNormShape g(kernel, x, {&x, &y}, {&rstd}, {&weight});
  if (delta) (void)LayerNormShape(kernel, x, {delta, residual}, {}, {});
  if (g.rows == 0) return;
  const LaunchCost cost = rmsnorm_forward_cost(x, delta, residual, weight, y, rstd);
  LaunchInfo info =
      kernel_launch_info(kernel, x, dim3(static_cast<unsigned>(g.rows)),
                         dim3(whole_warps(g.C, kRmsMaxThreadsPerRow)), 0, cost.flops, cost.bytes);
  info.function = "rmsnorm_forward";  // also for residual_rmsnorm_forward
  visit_f32_bf16(x, kernel, [&]<class T>() {
    launch_cuda_kernel(info, rmsnorm_forward_kernel<T>, x.data<T>(),
                       delta ? delta->data<T>() : nullptr, delta ? residual->data<T>() : nullptr,
                       weight.data<T>(), y.data<T>(), rstd.data<float>(), g.C,
                       static_cast<float>(eps));
  });
}

// dx = RMSNorm's backward (+ dresidual when given), then dweight.
void launch_rmsnorm_backward(const char* kernel, const Tensor& dy, const Tensor* dresidual,
                             const Tensor& x, const Tensor& weight, const Tensor& rstd,
                             const Tensor& dx, const Tensor& dweight) {
  const LayerNormShape g(kernel, x, {&x, &dy, &dx}, {&rstd}, {&weight, &dweight});
  if (dresidual) (void)LayerNormShape(kernel, x, {dresidual}, {}, {});
  visit_f32_bf16(x, kernel, [&]<class T>() {
    const int64_t chunks = (g.rows + kRmsRowsPerChunk - 1) / kRmsRowsPerChunk;
    // With no rows the sums are empty: the second kernel writes zeros from zero chunks.
    const Tensor partial =
        Tensor::empty({std::max<int64_t>(chunks, 1), g.C}, DType::f32, x.device());
    // 1. dx, and per-chunk partial sums of dweight (written to global memory).
    const bool vectorised =
        g.C % kVecWidth<T> == 0 &&
        all_vec_aligned(dy.data<T>(), x.data<T>(), weight.data<T>(), dx.data<T>(),
                        dresidual ? dresidual->data<T>() : nullptr);
    if (chunks > 0) {
      LaunchCost cost = rmsnorm_backward_rows_cost(dy, dresidual, x, weight, rstd, dx);
      cost.bytes += bytes_of({&partial});
      LaunchInfo info = kernel_launch_info(kernel, x, dim3(static_cast<unsigned>(chunks)),
                                           dim3(whole_warps(g.C, kRmsMaxThreadsPerRow)), 0,
                                           cost.flops, cost.bytes);
      info.function = "rmsnorm_backward";  // also for residual_rmsnorm_backward
      launch_cuda_kernel(info, rmsnorm_backward_kernel<T>, dy.data<T>(),
                         dresidual ? dresidual->data<T>() : nullptr, x.data<T>(), weight.data<T>(),
                         rstd.data<float>(), dx.data<T>(), partial.data<float>(), g.rows, g.C,
                         vectorised);
    }
    // 2. dweight: the chunks' partials added column by column in chunk order
    launch_chunk_column_sums<T, 1>("rmsnorm_weight_grad", "rmsnorm_weight_grad_combine", partial,
                                   {&dweight}, chunks, g.C);
  });
}

}  // namespace

void rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd,
                     double eps) {
  launch_rmsnorm_forward("rmsnorm_forward", x, nullptr, nullptr, weight, y, rstd, eps);
}

void rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                      const Tensor& dx, const Tensor& dweight) {
  launch_rmsnorm_backward("rmsnorm_backward", dy, nullptr, x, weight, rstd, dx, dweight);
}

void residual_rmsnorm_forward(const Tensor& x, const Tensor& delta, const Tensor& weight,
                              const Tensor& residual, const Tensor& y, const Tensor& rstd,
                              double eps) {
  launch_rmsnorm_forward("residual_rmsnorm_forward", x, &delta, &residual, weight, y, rstd, eps);
}

void residual_rmsnorm_backward(const Tensor& dy, const Tensor& dresidual, const Tensor& residual,
                               const Tensor& weight, const Tensor& rstd, const Tensor& dx,
                               const Tensor& dweight) {
  launch_rmsnorm_backward("residual_rmsnorm_backward", dy, &dresidual, residual, weight, rstd, dx,
                          dweight);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
