// Cost of the rotary position embedding (both directions), shared by kernels/cpu/rope.cpp and
// kernels/cuda/rope.cu (kernels/costs/launch_cost.h): qkv-like in and out [B, T, W], read and
// written once; `pairs` = B T (n_head + n_kv_head) D/2 rotated pairs.
//
// The rotation is the same on both devices: 4 multiplies and 2 adds per pair. The angles are not:
// cpu takes cos and sin from a table made once per (t, i) and kept across calls (kernels/cpu/
// rope.cpp), which is not counted; a CUDA thread computes its pair's angle, cos and sin itself
// (kernels/cuda/rope.cu), which the cuda launcher adds, kRopeAngleFlopsPerPair per pair (pow, cos
// and sin one operation each; an upper bound, as a thread reuses them for the heads it visits).
#pragma once

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"

namespace glass::kernels {

constexpr double kRopeRotationFlopsPerPair = 6;
constexpr double kRopeAngleFlopsPerPair = 4;  // emu and cuda only (above)

inline LaunchCost rope_cost(const Tensor& in, const Tensor& out, double pairs) {
  return {kRopeRotationFlopsPerPair * pairs, static_cast<double>(in.nbytes() + out.nbytes())};
}

}  // namespace glass::kernels
