// The second stage of a row-chunked parameter gradient (layernorm.cu: dweight and dbias,
// rmsnorm.cu: dweight): the per-chunk partial sums added column by column, deterministically.
//
// The first stage (each norm's backward kernel) writes, for each chunk of rows, K partial rows:
// partial f32 [chunks, K, C]. Here output k's column j is the sum over chunks c of
// partial[c][k][j], always in chunk order, so the bits do not depend on the GPU or the grid:
//   1. a 2-D grid, column blocks x groups of chunks_per_group consecutive chunks: block (bx, by)
//      sums its group's chunks for its columns; with one group it writes the outputs (rounded
//      once into T), with several the group's f32 sums to group_partial [groups, K, C];
//   2. with several groups, one thread per column adds the groups in group order and rounds once.
// Groups exist only so that the grid's y stays within its limit (65535) and the work spreads over
// more blocks than the column blocks alone.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/kernel_launcher.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

constexpr int kColumnSumThreads = 256;
constexpr int64_t kColumnSumChunksPerGroup = 8;
constexpr int64_t kColumnSumMaxGroups = 65535;

// The K outputs [C], passed to the kernels by value.
template <class T, int K>
struct ColumnSumOutputs {
  T* out[K];
};

// Step 1: block (bx, by) sums the chunks of group by for the columns of bx.
template <class T, int K>
__global__ void chunk_column_sums_kernel(const float* partial, float* group_partial,
                                         ColumnSumOutputs<T, K> outs, int64_t chunks,
                                         int64_t chunks_per_group, int64_t C) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= C) return;
  const int64_t first = blockIdx.y * chunks_per_group;
  const int64_t end = first + chunks_per_group < chunks ? first + chunks_per_group : chunks;
  float sum[K] = {};
  for (int64_t c = first; c < end; ++c)
    for (int k = 0; k < K; ++k) sum[k] += partial[(c * K + k) * C + j];
  for (int k = 0; k < K; ++k) {
    if (gridDim.y == 1)
      outs.out[k][j] = from_compute<T>(sum[k]);
    else
      group_partial[(blockIdx.y * K + k) * C + j] = sum[k];
  }
}

// Step 2: one thread per column j adds the groups' sums in group order (f32), rounded once into T.
template <class T, int K>
__global__ void chunk_column_sums_combine_kernel(const float* group_partial,
                                                 ColumnSumOutputs<T, K> outs, int64_t groups,
                                                 int64_t C) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= C) return;
  float sum[K] = {};
  for (int64_t g = 0; g < groups; ++g)
    for (int k = 0; k < K; ++k) sum[k] += group_partial[(g * K + k) * C + j];
  for (int k = 0; k < K; ++k) outs.out[k][j] = from_compute<T>(sum[k]);
}

// Launches step 1 as `name` and, when the chunks make more than one group, step 2 as
// `combine_name`. partial: f32 [max(chunks, 1), K, C] (chunks may be 0: the outputs become
// zeros); outs: K tensors [C] of T on partial's device.
template <class T, int K>
void launch_chunk_column_sums(const char* name, const char* combine_name, const Tensor& partial,
                              const std::array<const Tensor*, K>& outs, int64_t chunks, int64_t C) {
  const int64_t chunks_per_group = std::max<int64_t>(
      kColumnSumChunksPerGroup, (chunks + kColumnSumMaxGroups - 1) / kColumnSumMaxGroups);
  const int64_t groups = std::max<int64_t>((chunks + chunks_per_group - 1) / chunks_per_group, 1);
  const Tensor group_partial =
      Tensor::empty({groups > 1 ? groups : 1, K, groups > 1 ? C : 1}, DType::f32, partial.device());
  ColumnSumOutputs<T, K> out_ptrs{};
  double out_bytes = 0;
  for (int k = 0; k < K; ++k) {
    out_ptrs.out[k] = outs[k]->template data<T>();
    out_bytes += static_cast<double>(outs[k]->nbytes());
  }
  const double group_bytes = static_cast<double>(group_partial.nbytes());
  LaunchInfo info = kernel_launch_info(
      name, partial, dim3(ceil_div(C, kColumnSumThreads), static_cast<unsigned>(groups)),
      dim3(kColumnSumThreads), 0, static_cast<double>(K * chunks * C),
      static_cast<double>(partial.nbytes()) + out_bytes + (groups > 1 ? group_bytes : 0.0));
  info.function = "chunk_column_sums";
  launch_cuda_kernel(info, chunk_column_sums_kernel<T, K>, partial.data<float>(),
                     group_partial.data<float>(), out_ptrs, chunks, chunks_per_group, C);
  if (groups == 1) return;
  LaunchInfo combine = kernel_launch_info(
      combine_name, partial, dim3(ceil_div(C, kColumnSumThreads)), dim3(kColumnSumThreads), 0,
      static_cast<double>(K * groups * C), group_bytes + out_bytes);
  combine.function = "chunk_column_sums_combine";
  launch_cuda_kernel(combine, chunk_column_sums_combine_kernel<T, K>, group_partial.data<float>(),
                     out_ptrs, groups, C);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
