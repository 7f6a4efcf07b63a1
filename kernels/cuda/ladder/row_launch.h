// Host side of the row-wise ladders (softmax_ladder.cu, layernorm_ladder.cu with its RMSNorm
// pair): the checks every rung's launcher makes before it launches, and the launch shapes the
// rungs use.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/common.h"
#include "kernels/cuda/ladder/block_reduce.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD::ladder {

constexpr int kThreadsPerRowBlock = 128;  // one-thread-per-row rungs: rows per block

// x seen as [rows, cols] over its last dimension.
struct RowShape {
  int64_t rows, cols;
};

// Checks that x has a last dimension, runs on a CUDA device (emu or cuda) and is f32 (or bf16 too
// where `takes_bf16`), and that each tensor of `like_x`, `per_row` and `per_col` is contiguous on
// x's device with x's number of elements, `rows` or `cols`: `like_x` and `per_col` of x's dtype,
// `per_row` (statistics) of accum_dtype(x), f32. Throws naming the kernel and the offending tensor.
inline RowShape check_rows(const char* kernel, const Tensor& x,
                           std::initializer_list<const Tensor*> like_x,
                           std::initializer_list<const Tensor*> per_row,
                           std::initializer_list<const Tensor*> per_col, bool takes_bf16 = false) {
  GLASS_CHECK(x.dim() > 0 && x.size(-1) > 0, "{}: x {} has no last dimension to work on", kernel,
              x.describe());
  GLASS_CHECK(x.device().kind != DeviceKind::cpu,
              "{}: a CUDA kernel runs on emu or cuda, and x {} is on cpu", kernel, x.describe());
  const RowShape g{x.numel() / x.size(-1), x.size(-1)};
  GLASS_CHECK(g.rows <= INT_MAX, "{}: {} rows is more than a grid holds", kernel, g.rows);
  GLASS_CHECK(x.dtype() == DType::f32 || (takes_bf16 && x.dtype() == DType::bf16),
              "{}: x {} is {}; this rung takes {}", kernel, x.describe(), dtype_name(x.dtype()),
              takes_bf16 ? "f32 or bf16" : "f32 only");
  auto check = [&](std::initializer_list<const Tensor*> ts, int64_t numel, DType dtype) {
    for (const Tensor* t : ts)
      GLASS_CHECK(t->is_contiguous() && t->numel() == numel && t->dtype() == dtype &&
                      t->device() == x.device(),
                  "{}: {} must be contiguous {} with {} elements on {} (x is {})", kernel,
                  t->describe(), dtype_name(dtype), numel, x.device().str(), x.describe());
  };
  check(like_x, x.numel(), x.dtype());
  check(per_row, g.rows, accum_dtype(x.dtype()));
  check(per_col, g.cols, x.dtype());
  return g;
}

// How a rung maps threads to rows:
//   thread_per_row: blocks of kThreadsPerRowBlock threads, thread i of the grid owns row i;
//   block_per_row:  one block per row, whole warps for the row's columns (at most kMaxBlock
//                   threads; each thread strides over the rest);
//   block_per_row_float4: the same for the row's float4s, a quarter of the columns.
enum class RowMapping { thread_per_row, block_per_row, block_per_row_float4 };

inline LaunchInfo row_launch_info(const char* kernel, RowMapping mapping, const Tensor& x,
                                  const RowShape& g, double flops, double bytes) {
  if (mapping == RowMapping::thread_per_row)
    return kernel_launch_info(kernel, x, dim3(ceil_div(g.rows, kThreadsPerRowBlock)),
                              dim3(kThreadsPerRowBlock), 0, flops, bytes);
  const int64_t items = mapping == RowMapping::block_per_row ? g.cols : (g.cols + 3) / 4;
  const dim3 block(whole_warps(items, kMaxBlock));
  return kernel_launch_info(kernel, x, dim3(static_cast<unsigned>(g.rows)), block, 0, flops, bytes);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD::ladder
