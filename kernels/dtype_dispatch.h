// The dtype dispatch of the kernels, shared by the cpu kernels and the CUDA host launchers, so that
// both devices refuse a dtype a kernel lacks with the same message:
//
//   visit_dtype<float, bf16>(t, "softmax_forward", [&]<class T>() { ...T... });
//
// calls the lambda with the element type T that stores t's dtype, among those listed; any other
// dtype is an error naming the kernel, the dtypes it has, the device and the tensor. The usual
// lists have names: visit_float (f32, f64), and in kernels/cuda/common.h visit_element (f32, f64,
// bf16) and visit_f32_bf16.
#pragma once

#include <string>

#include "engine/error.h"
#include "engine/tensor.h"

namespace glass::kernels {

// What a kernel's math runs in for the element type T it stores: float for bf16 (every sum, max
// and exp in f32 or better), T itself otherwise. The cpu and CUDA kernels load and store through
// it (to_compute / from_compute: kernels/cpu/element.h, kernels/cuda/common.h).
template <class T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<bf16> {
  using type = float;
};
template <class T>
using compute_t = typename ComputeType<T>::type;

template <class... Types, class Fn>
void visit_dtype(const Tensor& t, const char* kernel, Fn&& fn) {
  // The first listed type whose dtype is t's runs; the fold stops there.
  const bool ran =
      ((t.dtype() == dtype_of<Types>() && (fn.template operator()<Types>(), true)) || ...);
  if (ran) return;
  std::string names;
  ((names += (names.empty() ? "" : ", ") + std::string(dtype_name(dtype_of<Types>()))), ...);
  fail("{}: dtype {} is not supported on {} ({}): {}", kernel, dtype_name(t.dtype()),
       t.device().str(), names, t.describe());
}

// The kernels whose math runs in f32 or f64 only.
template <class Fn>
void visit_float(const Tensor& t, const char* kernel, Fn&& fn) {
  visit_dtype<float, double>(t, kernel, std::forward<Fn>(fn));
}

}  // namespace glass::kernels
