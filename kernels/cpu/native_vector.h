// The build's own SIMD register as a GCC vector: 16 floats on AVX-512, 8 on AVX2, 4 on SSE.
//
// The cpu GEMM and GEMV think in 16-float vectors (their tiles, panels and sum trees are laid out
// so). GCC keeps such a 64-byte vector in a register only where one register holds it: on an AVX2
// build it lowers every 16-float value through the stack, in 128-bit pieces, and the GEMM's k loop
// ran at a twentieth of the FMA rate (bench/RESULTS.md, 2026-12-07). So their inner loops hold
// `Native` vectors, 16 / kNativeLanes of them per 16 lanes; lanes stay independent, so the sums,
// and their bits, are the same at every width.
#pragma once

#include <cstring>

namespace glass::kernels::cpu {

#if defined(__AVX512F__)
inline constexpr int kNativeLanes = 16;
#elif defined(__AVX__)
inline constexpr int kNativeLanes = 8;
#else
inline constexpr int kNativeLanes = 4;
#endif
using Native = float __attribute__((vector_size(kNativeLanes * sizeof(float))));

// kNativeLanes floats from p (any alignment).
[[gnu::always_inline]] inline Native load_native(const float* p) {
  Native v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace glass::kernels::cpu
