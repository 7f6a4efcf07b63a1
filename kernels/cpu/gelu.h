// GELU's tanh form as the cpu computes it, per element: the body of the elementwise kernels'
// loops (gelu_forward, gelu_backward and their bf16 forms, kernels/cpu/elementwise.cpp), of the
// bf16 GELU GEMM's tiles (kernels/cpu/sgemm_bf16.cpp) and of its one-pass dGELU epilogue
// (kernels/cpu/reduce.cpp). One definition, so that every kernel gives the same bits for the same
// value.
#pragma once

#include "kernels/cpu/cpu.h"  // exp_vectorisable

namespace glass::kernels::cpu {

// GELU (tanh approximation): y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 1 + tanh(u) = 2 sigmoid(2u), y = x sigmoid(2u): one exp, and no cancellation near 0.
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

// Both helpers write -2u = x (a + b x^2), with a = -2 sqrt(2/pi) and b = a 0.044715 folded into
// two constants, and sigmoid(2u) = 1 / (1 + e^(-2u)): one exp.
// They are always inlined: they are the body of map1/map2's loops, which GCC vectorises only when
// the call is gone (left out of line, gelu_backward_of ran one element at a time and took 14-21%
// of the default model's step).
constexpr double kMinus2U = -2 * kSqrt2OverPi;           // a
constexpr double kMinus2UCubic = kMinus2U * kGeluCubic;  // b

// y = gelu(x) = x sigmoid(2u) = x / (1 + e^(-2u)), computed in C (compute_t of the stored type).
template <class C>
[[gnu::always_inline]] inline C gelu_forward_of(C v) {
  const C a = static_cast<C>(kMinus2U), b = static_cast<C>(kMinus2UCubic);
  return v / (C(1) + exp_vectorisable(v * (a + b * (v * v))));
}

// dx = dy gelu'(x), computed in C (compute_t of the stored type).
template <class C>
[[gnu::always_inline]] inline C gelu_backward_of(C v, C g) {
  const C a = static_cast<C>(kMinus2U), b = static_cast<C>(kMinus2UCubic);
  // With q = sigmoid(2u) = 1 / (1 + e^z), z = -2u = x (a + b x^2): dq/dx = -q (1 - q) dz/dx, so
  // dy/dx = q + x dq/dx = q - x q (1 - q) (a + 3b x^2).
  const C v2 = v * v;
  const C q = C(1) / (C(1) + exp_vectorisable(v * (a + b * v2)));
  return g * (q - v * q * (C(1) - q) * (a + C(3) * b * v2));
}

}  // namespace glass::kernels::cpu
