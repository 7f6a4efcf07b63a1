// f32 vectors rounded to bf16 with bf16::from_float's rule (round half to even; a NaN stays a NaN,
// made quiet; subnormals round like any other value: engine/dtype.h), for the AVX-512 code that
// stores bf16 (the bf16 GEMM's micro-kernel, kernels/cpu/sgemm_bf16.cpp, and round_row_to_bf16,
// kernels/cpu/round_bf16.cpp). x86-64 only; the callers check cpu_has_avx512_bf16() first.
//
// AVX512-BF16's vcvtne2ps2bf16 rounds 32 values in one instruction, with from_float's rule except
// for one thing: it reads a subnormal f32 as zero (and writes a zero of its sign). A normal f32
// never rounds to a subnormal bf16 (the two share their exponent range), so the instruction's
// result is from_float's exactly unless an input is subnormal; 32 values with one take the rule
// in integer steps instead (round_to_bf16_bits). tests/kernels/test_round_bf16.cpp checks both
// against from_float on every sign, exponent and rounding boundary.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace glass::kernels::cpu {

// The ISA the functions below are compiled for; a caller that inlines them names it too.
#define GLASS_BF16_ROUND_TARGET "avx512f,avx512bw,avx512bf16"

// 16 f32 lanes rounded to bf16 in integer steps, each in the low half of its 32-bit lane.
__attribute__((target(GLASS_BF16_ROUND_TARGET))) inline __m512i round_to_bf16_bits(__m512 v) {
  // (the shifts' zero-masked forms: the unmasked ones start from an undefined vector, which GCC
  // then reports as maybe uninitialised)
  const __mmask16 all = 0xffff;
  const __m512i u = _mm512_castps_si512(v);
  const __m512i high = _mm512_maskz_srli_epi32(all, u, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_maskz_srli_epi32(
      all, _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(rounded, nan, high, _mm512_set1_epi32(0x40));
}

// The lanes of v that hold a subnormal: exponent bits all zero, significand not.
__attribute__((target(GLASS_BF16_ROUND_TARGET))) inline __mmask16 subnormal_lanes(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 exponent_zero = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_test_epi32_mask(exponent_zero, u, _mm512_set1_epi32(0x007fffff));
}

// low's 16 lanes and then high's, rounded to 32 bf16 values (low's first in memory order). The
// instruction by inline assembly: clang 16 crashes when it optimises the intrinsics' __m512bh
// type (as in sgemm_bf16.cpp); in AT&T order its first operand fills the low half.
__attribute__((target(GLASS_BF16_ROUND_TARGET))) inline __m512i round_pair_to_bf16(__m512 low,
                                                                                   __m512 high) {
  if ((subnormal_lanes(low) | subnormal_lanes(high)) != 0) {
    alignas(64) uint16_t bits[32];
    _mm512_mask_cvtepi32_storeu_epi16(bits, 0xffff, round_to_bf16_bits(low));
    _mm512_mask_cvtepi32_storeu_epi16(bits + 16, 0xffff, round_to_bf16_bits(high));
    return _mm512_load_si512(bits);
  }
  __m512i rounded;
  asm("vcvtne2ps2bf16 %[low], %[high], %[rounded]"
      : [rounded] "=v"(rounded)
      : [low] "v"(low), [high] "v"(high));
  return rounded;
}

}  // namespace glass::kernels::cpu
#endif
