// The roofline cost model: how long an op must take at the least, given what it computes and
// what it moves.
//
//   intensity = FLOPs / bytes                       (FLOP/byte)
//   floor     = max(FLOPs / peak FLOP/s, bytes / peak bytes/s)
//   bound     = memory when intensity < ridge = peak FLOP/s / peak bytes/s, else compute
//
// Bytes are the ideal traffic: every input read once and every output written once, as if the
// caches were perfect. A kernel's achieved time over its floor says how far it is from the roof.
//
// A launch (engine/launch.h) is drawn against the roof of the unit that does its FLOPs
// (LaunchInfo::unit): the CUDA cores' f32 rate, the Tensor Cores' bf16 or TF32 rate; a launch that
// only moves bytes (unit `memory`) has only the memory roof.
#pragma once

#include <cstdint>
#include <string>

#include "engine/device_peaks.h"
#include "engine/launch.h"

namespace glass {

struct OpCost {
  double flops = 0;
  double bytes = 0;
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

// C[M,N] = A[M,K] B[K,N]: 2MKN FLOPs (a multiply and an add per term), b(MK + KN + MN) bytes
// for b-byte elements.
OpCost gemm_cost(int64_t m, int64_t k, int64_t n, DType dtype);

// An elementwise op over n elements reading `inputs` tensors and writing `outputs`, doing
// `flops_per_element` FLOPs per element: n * flops_per_element FLOPs, b n (inputs + outputs) bytes.
OpCost elementwise_cost(int64_t n, int inputs, int outputs, double flops_per_element, DType dtype);

// Causal attention forward, B batches x H heads of T rows of D, elements of `dtype`:
//   FLOPs  = E (4 D + 5) with E = B H T (T + 1) / 2 causal entries (S = Q K^T and O = P V, 2 D
//            each per entry; max, subtract, exp, sum, scale of the softmax)
//   naive  bytes = b B H (4 T D + 4 T^2): q, k, v read and out written once, and the T x T matrix
//          through memory four times (S written, S read, P written, P read); memory = b B H T^2
//   flash  bytes = b B H D (2 T + 2 R) + 4 B H T: q read and out written once, K and V once per
//          query tile of `tile_rows` rows (R = sum over the tiles of the keys up to the tile's
//          last row), lse written; memory = 4 B H T (lse, f32)
struct AttentionCost {
  OpCost naive, flash;
  double naive_memory_bytes = 0, flash_memory_bytes = 0;
};
AttentionCost attention_cost(int64_t batch, int64_t heads, int64_t seq_len, int64_t head_dim,
                             DType dtype, int64_t tile_rows = 32);

struct RooflinePoint {
  double intensity = 0;  // FLOP/byte
  double ridge = 0;      // FLOP/byte
  bool memory_bound = false;
  double floor_s = 0;  // the least time the op can take
  const char* bound() const { return memory_bound ? "memory" : "compute"; }
};

RooflinePoint roofline(const OpCost& cost, double peak_flops, double peak_bytes_per_s);
inline RooflinePoint roofline(const OpCost& cost, const DevicePeaks& peaks, DType dtype) {
  return roofline(cost, peaks.flops(dtype), peaks.bytes_per_s);
}

// The FLOP/s roof of `unit` on `peaks`: f32 for cuda_core (and for the FLOPs of a `memory` launch,
// which has none in practice), bf16 or tf32 for the Tensor Cores (on cpu: bf16 for vdpbf16ps,
// ComputeUnit); 0 where the device has no such peak (cpu has no TF32 path).
double unit_peak_flops(const DevicePeaks& peaks, ComputeUnit unit);
// The roof a launch on `unit` is judged against where it must have one: the unit's peak, or the
// f32 peak where the device has none for the unit (emu runs its bf16 "tensor core" math in f32 on
// the host; a GPU without a datasheet row has no bf16 peak).
double unit_roof_flops(const DevicePeaks& peaks, ComputeUnit unit);
// A launch's roofline lower bound in seconds: max(flops / unit_peak_flops, bytes / bandwidth).
// Throws glass::Error naming the device, the unit and the kernel when a launch does FLOPs on a
// unit the device has no peak for.
double launch_bound_s(const LaunchInfo& launch, const DevicePeaks& peaks);

}  // namespace glass
