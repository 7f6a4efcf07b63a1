// Argument checks of the reductions, shared by the cpu kernels and the CUDA host launchers, so
// every device rejects the same bad input with the same message.
#pragma once

#include <span>

#include "engine/error.h"
#include "engine/tensor.h"

namespace glass::kernels {

// x viewed as [outer, n, inner] around dimension `dim`, the view sum_dim reduces over n.
struct SumDimShape {
  int64_t outer = 1, n = 1, inner = 1;
};

// sum_dim: contiguous input and output of one dtype, the output shaped like x without `dim`.
inline SumDimShape check_sum_dim(const Tensor& x, const Tensor& out, int dim) {
  GLASS_CHECK(x.is_contiguous() && out.is_contiguous() && x.dtype() == out.dtype(),
              "sum_dim: input {} and output {} must be contiguous and of one dtype", x.describe(),
              out.describe());
  const int d = x.wrap_dim(dim);
  SumDimShape s;
  for (int i = 0; i < d; ++i) s.outer *= x.size(i);
  for (int i = d + 1; i < x.dim(); ++i) s.inner *= x.size(i);
  s.n = x.size(d);
  GLASS_CHECK(out.numel() == s.outer * s.inner,
              "sum_dim: output {} does not fit {} summed over dim {}", out.describe(), x.describe(),
              dim);
  return s;
}

inline bool is_f32_or_f64(const Tensor& t) {
  return t.dtype() == DType::f32 || t.dtype() == DType::f64;
}

// sum_squares: contiguous floating inputs (f32, f64; bf16 where the device has bf16 kernels), all
// on the output's device; one f32/f64 output element.
inline void check_sum_squares(std::span<const Tensor> xs, const Tensor& out) {
  GLASS_CHECK(out.numel() == 1 && out.is_contiguous() && is_f32_or_f64(out),
              "sum_squares: output {} must hold one f32 or f64 element", out.describe());
  for (const Tensor& x : xs)
    GLASS_CHECK(x.is_contiguous() && is_floating(x.dtype()) && x.device() == out.device(),
                "sum_squares: input {} must be contiguous floating, on the output's device {}",
                x.describe(), out.device().str());
}

}  // namespace glass::kernels
