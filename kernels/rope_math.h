// The angles of the rotary position embedding (Llama), shared by the cpu loops (kernels/cpu/
// rope.cpp) and the CUDA kernel (kernels/cuda/rope.cu), so that both devices form them with the
// same operations, and with the ones Hugging Face's LlamaRotaryEmbedding uses:
//   inv_freq_i = 1 / theta^(2i / D)    (i < D/2; 2i / D divided in C, theta^. by pow in C)
//   angle      = position * inv_freq_i (the position converted to C first)
// C is the math type: f32 for f32 and bf16 tensors (what PyTorch computes for Hugging Face), f64
// for the f64 tensors of gradcheck. The rotation itself (rotate-half) is in
// kernels/kernel_list.inc.
#pragma once

#include <cmath>
#include <cstdint>

#include "engine/rng.h"  // GLASS_HD

namespace glass::kernels {

GLASS_HD inline float rope_pow(float base, float exponent) { return powf(base, exponent); }
GLASS_HD inline double rope_pow(double base, double exponent) { return pow(base, exponent); }
GLASS_HD inline float rope_cos(float angle) { return cosf(angle); }
GLASS_HD inline double rope_cos(double angle) { return cos(angle); }
GLASS_HD inline float rope_sin(float angle) { return sinf(angle); }
GLASS_HD inline double rope_sin(double angle) { return sin(angle); }

// The frequency of pair i (of D/2) for head dim D: the same at every position, so a caller
// filling a table of positions can form it once per pair.
template <class C>
GLASS_HD inline C rope_inv_freq(int64_t i, int64_t D, double theta) {
  return C(1) / rope_pow(static_cast<C>(theta), static_cast<C>(2 * i) / static_cast<C>(D));
}

// The cosine and sine of an angle, in C.
template <class C>
struct RopeRotation {
  C cos, sin;
};
// ... of the angle position * inv_freq (inv_freq from rope_inv_freq).
template <class C>
GLASS_HD inline RopeRotation<C> rope_rotation_at(int64_t position, C inv_freq) {
  const C angle = static_cast<C>(position) * inv_freq;
  return {rope_cos(angle), rope_sin(angle)};
}
// ... of pair i's angle at `position`.
template <class C>
GLASS_HD inline RopeRotation<C> rope_rotation(int64_t position, int64_t i, int64_t D,
                                              double theta) {
  return rope_rotation_at<C>(position, rope_inv_freq<C>(i, D, theta));
}

}  // namespace glass::kernels
