// GELU's tanh form as the cpu computes it, per element: the body of the elementwise kernels'
// loops (gelu_forward, gelu_backward and their bf16 forms, kernels/cpu/elementwise.cpp) and of the
// bf16 GEMM's one-pass dGELU epilogue (kernels/cpu/reduce.cpp). One definition, so that every
// kernel gives the same bits for the same value.
#pragma once

#include "kernels/cpu/cpu.h"  // exp_vectorisable

namespace glass::kernels::cpu {

// GELU (tanh approximation): y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 1 + tanh(u) = 2 sigmoid(2u), y = x sigmoid(2u): one exp, and no cancellation near 0.
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

// sigmoid(2u) = 1 / (1 + e^(-2u)).
// The three GELU helpers are always inlined: they are the body of map1/map2's loops, which GCC
// vectorises only when the call is gone (left out of line, gelu_backward_of ran one element at a
// time and took 14-21% of the default model's step).
template <class T>
[[gnu::always_inline]] inline T sigmoid_2u(T u) {
  return T(1) / (T(1) + exp_vectorisable(T(-2) * u));
}

// y = gelu(x), computed in C (compute_t of the stored type).
template <class C>
[[gnu::always_inline]] inline C gelu_forward_of(C v) {
  const C s = static_cast<C>(kSqrt2OverPi), c = static_cast<C>(kGeluCubic);
  return v * sigmoid_2u(s * (v + c * v * v * v));
}

// dx = dy gelu'(x), computed in C (compute_t of the stored type).
template <class C>
[[gnu::always_inline]] inline C gelu_backward_of(C v, C g) {
  const C s = static_cast<C>(kSqrt2OverPi), c = static_cast<C>(kGeluCubic);
  // With t = tanh(u) and q = sigmoid(2u): 1 + t = 2q and 1 - t^2 = 4q(1 - q), so
  // dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx = q + 2 x q (1 - q) du/dx,
  // du/dx = sqrt(2/pi) (1 + 3c x^2).
  const C q = sigmoid_2u(s * (v + c * v * v * v));
  const C du = s * (C(1) + C(3) * c * v * v);
  return g * (q + C(2) * v * q * (C(1) - q) * du);
}

}  // namespace glass::kernels::cpu
