// CUDA kernels for LayerNorm over the last dimension: x [N, C], weight and bias [C], mean and
// rstd [N] (contracts in kernels/kernel_list.inc; the cpu reference is kernels/cpu/layernorm.cpp),
// and the fused residual add + LayerNorm of a transformer block.
//
//   forward:  mean = sum(x)/C, var = sum((x - mean)^2)/C, rstd = 1/sqrt(var + eps),
//             xhat = (x - mean) * rstd, y = xhat * weight + bias     (mean and rstd saved)
//   backward: dxhat = dy * weight,
//             dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
//             dweight = sum over rows of dy * xhat, dbias = sum over rows of dy
//   fused residual (residual_layernorm_*): forward reads x and delta once, stores
//             residual = x + delta (rounded to T) and normalises the stored values, in the same
//             block; backward adds the gradient that reached the residual itself while it writes
//             dx = dresidual + (the dx above), the gradient of both x and delta. Each saves a
//             full pass over [N, C] (the separate add, or the separate gradient sum) and a launch.
//
// Thread mapping. Forward: one block per row, its threads striding over the C columns in 16-byte
// vectors (kernels/cuda/vector_row.h: a scalar head up to the row's first 16-byte boundary,
// vectors, a scalar tail; all scalar when the arrays are not at one offset mod 16 bytes),
// coalesced; the row sums are block reductions (warp butterfly shuffles, then the warps in warp
// order). The variance is taken around the mean in a second pass, as on cpu; the second and third
// passes read back what the same thread wrote or read in the first (cache hits). Backward: one
// block per chunk of kRowsPerChunk consecutive rows. The block walks its rows in order: two block
// reductions give the row's means, then each thread writes dx for its columns and adds dy * xhat
// and dy into the chunk's partial dweight/dbias sums, a scratch buffer [chunks, 2, C] in device
// memory where each column belongs to one thread (no race, no atomics). The parameter gradients
// are then those partials added column by column in chunk order (chunk_column_sums.h: a 2-D grid
// of column blocks x groups of chunks, GPT-2 at 8192 rows, C = 768: 3 x 32 blocks, where one
// thread per column would give 3; then the groups in group order). Every order is fixed by the
// code, so the results are bit-identical run to run. Elements are f32 or bf16 (with f32 statistics,
// sums and partial gradients either way). The plain and the fused launchers run the same kernels:
// the plain ones pass null for delta/residual and dresidual.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "kernels/costs/norms.h"
#include "kernels/cuda/chunk_column_sums.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/vector_row.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kMaxThreadsPerRow = 512;
constexpr int64_t kRowsPerChunk = 32;

// Every kernel is templated on the stored element type T of x, y, dy, dx and the parameters
// (float or bf16); loads convert to f32 (to_compute), the statistics, the sums and the chunks'
// partial parameter gradients are f32, and each output element is rounded once when stored.

// One block per row r. With delta (and residual) given, the row normalised is residual = x + delta.
// Every array of the row is walked in 16-byte vectors where they share a split (vector_row.h).
template <class T>
__global__ void layernorm_forward_kernel(const T* x, const T* delta, T* residual, const T* weight,
                                         const T* bias, T* y, float* mean, float* rstd, int64_t C,
                                         float eps) {
  constexpr int W = kVecWidth<T>;
  const int64_t r = blockIdx.x;
  const T* xr = x + r * C;
  T* yr = y + r * C;
  const T* dr = delta != nullptr ? delta + r * C : nullptr;
  T* sr = delta != nullptr ? residual + r * C : nullptr;
  const RowSplit split = split_row(C, xr, yr, weight, bias, dr, sr);
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
  // 1. mean, then the variance around it
  float s = 0;
  for_each_column(xr, split, C, [&](int64_t, T xj) { s += to_compute(xj); });
  const float m = block_reduce(s, Sum{}) / static_cast<float>(C);
  float v = 0;
  for_each_column(xr, split, C, [&](int64_t, T xj) {
    const float d = to_compute(xj) - m;
    v += d * d;
  });
  const float rs = 1.0f / sqrtf(block_reduce(v, Sum{}) / static_cast<float>(C) + eps);
  // 2. normalise, scale and shift
  auto normalise = [&](T xj, T wj, T bj) {
    return from_compute<T>((to_compute(xj) - m) * rs * to_compute(wj) + to_compute(bj));
  };
  walk_row<T>(
      split, C, [&](int64_t j) { yr[j] = normalise(xr[j], weight[j], bias[j]); },
      [&](int64_t j) {
        const Vec<T> a = load_vec(xr + j), w = load_vec(weight + j), b = load_vec(bias + j);
        Vec<T> o;
        for (int k = 0; k < W; ++k) o.v[k] = normalise(a.v[k], w.v[k], b.v[k]);
        store_vec(yr + j, o);
      });
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
}

// One block per chunk of kRowsPerChunk rows: dx for its rows (plus dresidual when given), and the
// chunk's partial sums partial[chunk] = {dweight[C], dbias[C]} (f32). Column j of the partials
// belongs to one thread for all the chunk's rows (no race), so every row has the same split: the
// vectors start at column 0 (`vectorised`: C a multiple of the vector width and every array
// 16-byte aligned, checked by the launcher), or the whole row is scalar.
template <class T>
__global__ void layernorm_backward_kernel(const T* dy, const T* dresidual, const T* x,
                                          const T* weight, const float* mean, const float* rstd,
                                          T* dx, float* partial, int64_t rows, int64_t C,
                                          bool vectorised) {
  constexpr int W = kVecWidth<T>;
  const RowSplit split = vectorised ? RowSplit{0, C / W} : RowSplit{C, 0};
  float* pw = partial + static_cast<int64_t>(blockIdx.x) * 2 * C;
  float* pb = pw + C;
  walk_row<T>(
      split, C, [&](int64_t j) { pw[j] = pb[j] = 0; },
      [&](int64_t j) {
        for (int k = 0; k < W; ++k) pw[j + k] = pb[j + k] = 0;
      });
  const int64_t first = blockIdx.x * kRowsPerChunk;
  const int64_t end = first + kRowsPerChunk < rows ? first + kRowsPerChunk : rows;
  for (int64_t r = first; r < end; ++r) {
    const T* dyr = dy + r * C;
    const T* xr = x + r * C;
    T* dxr = dx + r * C;
    const T* drr = dresidual != nullptr ? dresidual + r * C : nullptr;
    const float m = mean[r], rs = rstd[r];
    // 1. mean(dxhat) and mean(dxhat * xhat), with dxhat = dy * w, xhat = (x - mean) * rstd
    float sum_dxhat = 0, sum_dxhat_xhat = 0;
    auto add_sums = [&](T dyj, T xj, T wj) {
      const float dxhat = to_compute(dyj) * to_compute(wj);
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * (to_compute(xj) - m) * rs;
    };
    walk_row<T>(
        split, C, [&](int64_t j) { add_sums(dyr[j], xr[j], weight[j]); },
        [&](int64_t j) {
          const Vec<T> d = load_vec(dyr + j), a = load_vec(xr + j), w = load_vec(weight + j);
          for (int k = 0; k < W; ++k) add_sums(d.v[k], a.v[k], w.v[k]);
        });
    const float mean_dxhat = block_reduce(sum_dxhat, Sum{}) / static_cast<float>(C);
    const float mean_dxhat_xhat = block_reduce(sum_dxhat_xhat, Sum{}) / static_cast<float>(C);
    // 2. dx (plus the residual's own gradient, rounded once), and this row's share of the chunk's
    //    dweight and dbias (column j is this thread's)
    auto dx_of = [&](int64_t j, T dyv, T xv, T wv, float dres) {
      const float xhat = (to_compute(xv) - m) * rs;
      const float dyj = to_compute(dyv);
      const float dxj = rs * (dyj * to_compute(wv) - mean_dxhat - xhat * mean_dxhat_xhat);
      pw[j] += dyj * xhat;
      pb[j] += dyj;
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

// residual = x + delta when delta is given, y = LayerNorm of the rows, mean and rstd saved.
void launch_layernorm_forward(const char* kernel, const Tensor& x, const Tensor* delta,
                              const Tensor* residual, const Tensor& weight, const Tensor& bias,
                              const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps) {
  const LayerNormShape g(kernel, x, {&x, &y}, {&mean, &rstd}, {&weight, &bias});
  if (delta) (void)LayerNormShape(kernel, x, {delta, residual}, {}, {});
  if (g.rows == 0) return;
  const LaunchCost cost = layernorm_forward_cost(x, delta, residual, weight, bias, y, mean, rstd);
  LaunchInfo info =
      kernel_launch_info(kernel, x, dim3(static_cast<unsigned>(g.rows)),
                         dim3(whole_warps(g.C, kMaxThreadsPerRow)), 0, cost.flops, cost.bytes);
  info.function = "layernorm_forward";  // also for residual_layernorm_forward
  visit_f32_bf16(x, kernel, [&]<class T>() {
    launch_cuda_kernel(info, layernorm_forward_kernel<T>, x.data<T>(),
                       delta ? delta->data<T>() : nullptr, delta ? residual->data<T>() : nullptr,
                       weight.data<T>(), bias.data<T>(), y.data<T>(), mean.data<float>(),
                       rstd.data<float>(), g.C, static_cast<float>(eps));
  });
}

// dx = LayerNorm's backward (+ dresidual when given), then dweight and dbias.
void launch_layernorm_backward(const char* kernel, const Tensor& dy, const Tensor* dresidual,
                               const Tensor& x, const Tensor& weight, const Tensor& mean,
                               const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                               const Tensor& dbias) {
  const LayerNormShape g(kernel, x, {&x, &dy, &dx}, {&mean, &rstd}, {&weight, &dweight, &dbias});
  if (dresidual) (void)LayerNormShape(kernel, x, {dresidual}, {}, {});
  visit_f32_bf16(x, kernel, [&]<class T>() {
    const int64_t chunks = (g.rows + kRowsPerChunk - 1) / kRowsPerChunk;
    // With no rows the sums are empty: the second kernel writes zeros from zero chunks.
    const Tensor partial =
        Tensor::empty({std::max<int64_t>(chunks, 1), 2, g.C}, DType::f32, x.device());
    // 1. dx, and per-chunk partial sums of dweight and dbias (written to global memory).
    // The vector path needs one split for every row (the kernel's comment): C a multiple of the
    // vector width and every array 16-byte aligned.
    const bool vectorised =
        g.C % kVecWidth<T> == 0 &&
        all_vec_aligned(dy.data<T>(), x.data<T>(), weight.data<T>(), dx.data<T>(),
                        dresidual ? dresidual->data<T>() : nullptr);
    if (chunks > 0) {
      LaunchCost cost = layernorm_backward_rows_cost(dy, dresidual, x, weight, mean, rstd, dx);
      cost.bytes += bytes_of({&partial});
      LaunchInfo info =
          kernel_launch_info(kernel, x, dim3(static_cast<unsigned>(chunks)),
                             dim3(whole_warps(g.C, kMaxThreadsPerRow)), 0, cost.flops, cost.bytes);
      info.function = "layernorm_backward";  // also for residual_layernorm_backward
      launch_cuda_kernel(info, layernorm_backward_kernel<T>, dy.data<T>(),
                         dresidual ? dresidual->data<T>() : nullptr, x.data<T>(), weight.data<T>(),
                         mean.data<float>(), rstd.data<float>(), dx.data<T>(),
                         partial.data<float>(), g.rows, g.C, vectorised);
    }
    // 2. dweight and dbias: the chunks' partials added column by column in chunk order
    launch_chunk_column_sums<T, 2>("layernorm_param_grads", "layernorm_param_grads_combine",
                                   partial, {&dweight, &dbias}, chunks, g.C);
  });
}

}  // namespace

void layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                       const Tensor& mean, const Tensor& rstd, double eps) {
  launch_layernorm_forward("layernorm_forward", x, nullptr, nullptr, weight, bias, y, mean, rstd,
                           eps);
}

void layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                        const Tensor& rstd, const Tensor& dx, const Tensor& dweight,
                        const Tensor& dbias) {
  launch_layernorm_backward("layernorm_backward", dy, nullptr, x, weight, mean, rstd, dx, dweight,
                            dbias);
}

void residual_layernorm_forward(const Tensor& x, const Tensor& delta, const Tensor& weight,
                                const Tensor& bias, const Tensor& residual, const Tensor& y,
                                const Tensor& mean, const Tensor& rstd, double eps) {
  launch_layernorm_forward("residual_layernorm_forward", x, &delta, &residual, weight, bias, y,
                           mean, rstd, eps);
}

void residual_layernorm_backward(const Tensor& dy, const Tensor& dresidual, const Tensor& residual,
                                 const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  launch_layernorm_backward("residual_layernorm_backward", dy, &dresidual, residual, weight, mean,
                            rstd, dx, dweight, dbias);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
