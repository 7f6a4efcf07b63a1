// The element types of the cpu kernels: what a kernel stores (float, double, or bf16) and what its
// math runs in (compute_t: float for bf16, so every sum, max and exp is f32 or better). A kernel
// templated on the stored type T loads with to_compute and stores with from_compute<T>: for float
// and double both are the identity; for bf16 a load is exact (the top 16 bits of a float) and a
// store rounds to nearest even once (bf16::from_float, engine/dtype.h; a NaN stays a quiet NaN).
// These are the rules of kernels/cuda/common.h's helpers of the same names, which emu and cuda
// run, so a cpu kernel and its CUDA twin that sum in the same order store the same bits.
//
// Both conversions are integer shifts, adds and a select, which the compiler turns into vector
// code (AVX-512F or AVX2) inside the kernels' loops. Rows rounded in a pass of their own
// (round_row_to_bf16, cpu.h) and the bf16 GEMM's tiles use AVX512-BF16's vcvtne2ps2bf16 instead,
// where the CPU has it: it flushes subnormal inputs to zero, which these rules do not, so 32 values
// with a subnormal among them take the integer steps (kernels/cpu/round_bf16.h).
#pragma once

#include <type_traits>

#include "engine/dtype.h"
#include "kernels/dtype_dispatch.h"

namespace glass::kernels::cpu {

inline float to_compute(float v) { return v; }
inline double to_compute(double v) { return v; }
inline float to_compute(bf16 v) { return v.to_float(); }

template <class T>
inline T from_compute(compute_t<T> v) {
  if constexpr (std::is_same_v<T, bf16>)
    return bf16::from_float(v);
  else
    return v;
}

// The dispatch of the cpu kernels that have a bf16 form (bf16 mixed precision, README): T =
// float, bf16 or double, as t's dtype says (kernels/dtype_dispatch.h).
template <class Fn>
void visit_element(const Tensor& t, const char* kernel, Fn&& fn) {
  visit_dtype<float, bf16, double>(t, kernel, std::forward<Fn>(fn));
}

}  // namespace glass::kernels::cpu
