// saturating_i32: a floating-point value converted to i32 the way the GPU's conversion instruction
// does it (cvt.rzi.sat.s32), on every device, so that cpu, emu and cuda store the same integer.
//
// C++'s static_cast<int32_t>(double) is undefined for NaN and for values outside the i32 range
// (x86 returns INT_MIN, a GPU saturates, UBSan reports it). Here instead:
//   NaN              -> 0
//   v >= 2^31 - 1    -> INT32_MAX (+inf included)
//   v <= -2^31       -> INT32_MIN (-inf included)
//   otherwise        -> v rounded toward zero (2.7 -> 2, -2.7 -> -2), as a C cast.
#pragma once

#include <cstdint>

#include "engine/rng.h"  // GLASS_HD

namespace glass::kernels {

GLASS_HD inline int32_t saturating_i32(double v) {
  if (v != v) return 0;  // NaN
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return static_cast<int32_t>(v);  // in range: exact truncation toward zero
}

}  // namespace glass::kernels
