// visit_float: the dtype dispatch of the kernels that run in f32 or f64 only, shared by the cpu
// kernels and the CUDA host launchers (kernels/cuda/common.h adds the bf16 dispatches of the GPU
// kernels), so that both devices refuse another dtype with the same message.
#pragma once

#include "engine/error.h"
#include "engine/tensor.h"

namespace glass::kernels {

// Calls fn.template operator()<T>() with T = float or double, as t's dtype says; any other dtype
// is an error naming the kernel, the device and the tensor.
template <class Fn>
void visit_float(const Tensor& t, const char* kernel, Fn&& fn) {
  switch (t.dtype()) {
    case DType::f32:
      fn.template operator()<float>();
      return;
    case DType::f64:
      fn.template operator()<double>();
      return;
    default:
      fail("{}: dtype {} is not supported on {} (f32, f64): {}", kernel, dtype_name(t.dtype()),
           t.device().str(), t.describe());
  }
}

}  // namespace glass::kernels
