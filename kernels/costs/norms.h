// Costs of LayerNorm and RMSNorm and their residual-fused forms, shared by
// kernels/cpu/layernorm.cpp, kernels/cpu/rmsnorm.cpp, kernels/cuda/layernorm.cu and
// kernels/cuda/rmsnorm.cu (kernels/costs/launch_cost.h). Rows x [N, C]; `delta` (forward) or
// `dresidual` (backward) is given for the residual-fused entries. Bytes: each operand once.
//
// The backward's row pass is the same work on both devices: dx for every row, and the rows'
// contributions to the parameter gradients summed chunk by chunk (kRowsPerChunk rows). Where those
// chunk sums go is the one real difference, so the row-pass cost leaves out the parameter
// gradients' traffic and each launcher adds its own: cpu keeps a chunk's partial sums in its cache
// and writes dweight (and dbias) from the same launch (their bytes); cuda writes every chunk's
// partial sums to global memory (the partial tensor's bytes) and adds them column by column in a
// second launch, counted by kernels/cuda/chunk_column_sums.h (layernorm_param_grads,
// rmsnorm_weight_grad).
#pragma once

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"
#include "kernels/shape_checks.h"

namespace glass::kernels {

// LayerNorm forward, per element: 1 (mean) + 3 (variance) + 4 (normalise, scale, shift), + 1 (the
// residual add); x, y, weight, bias, mean, rstd (and delta, residual).
inline LaunchCost layernorm_forward_cost(const Tensor& x, const Tensor* delta,
                                         const Tensor* residual, const Tensor& weight,
                                         const Tensor& bias, const Tensor& y, const Tensor& mean,
                                         const Tensor& rstd) {
  double bytes = bytes_of({&x, &y, &weight, &bias, &mean, &rstd});
  if (delta) bytes += bytes_of({delta, residual});
  return {(delta ? 9.0 : 8.0) * static_cast<double>(x.numel()), bytes};
}

// LayerNorm backward's row pass, per element: 2 (xhat) + 1 (dxhat) + 3 (the two means) + 4 (dx) +
// 3 (dweight, dbias), + 1 (adding dresidual); dy, x, weight, mean, rstd, dx (and dresidual), not
// the parameter gradients (above).
inline LaunchCost layernorm_backward_rows_cost(const Tensor& dy, const Tensor* dresidual,
                                               const Tensor& x, const Tensor& weight,
                                               const Tensor& mean, const Tensor& rstd,
                                               const Tensor& dx) {
  double bytes = bytes_of({&dy, &x, &weight, &mean, &rstd, &dx});
  if (dresidual) bytes += bytes_of({dresidual});
  return {(dresidual ? 14.0 : 13.0) * static_cast<double>(x.numel()), bytes};
}

// RMSNorm forward, per element: 2 (sum of squares) + 2 (normalise, scale), + 1 (the residual add);
// x, y, weight, rstd (and delta, residual).
inline LaunchCost rmsnorm_forward_cost(const Tensor& x, const Tensor* delta, const Tensor* residual,
                                       const Tensor& weight, const Tensor& y, const Tensor& rstd) {
  double bytes = bytes_of({&x, &y, &weight, &rstd});
  if (delta) bytes += bytes_of({delta, residual});
  return {(delta ? 5.0 : 4.0) * static_cast<double>(x.numel()), bytes};
}

// RMSNorm backward's row pass, per element: 1 (xhat) + 1 (dxhat) + 2 (the mean) + 3 (dx) + 2
// (dweight), + 1 (dresidual); dy, x, weight, rstd, dx (and dresidual), not dweight (above).
inline LaunchCost rmsnorm_backward_rows_cost(const Tensor& dy, const Tensor* dresidual,
                                             const Tensor& x, const Tensor& weight,
                                             const Tensor& rstd, const Tensor& dx) {
  double bytes = bytes_of({&dy, &x, &weight, &rstd, &dx});
  if (dresidual) bytes += bytes_of({dresidual});
  return {(dresidual ? 10.0 : 9.0) * static_cast<double>(x.numel()), bytes};
}

}  // namespace glass::kernels
