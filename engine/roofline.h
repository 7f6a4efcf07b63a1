// The roofline cost model: how long an op must take at the least, given what it computes and
// what it moves.
//
//   intensity = FLOPs / bytes                       (FLOP/byte)
//   floor     = max(FLOPs / peak FLOP/s, bytes / peak bytes/s)
//   bound     = memory when intensity < ridge = peak FLOP/s / peak bytes/s, else compute
//
// Bytes are the ideal traffic: every input read once and every output written once, as if the
// caches were perfect. A kernel's achieved time over its floor says how far it is from the roof.
#pragma once

#include <cstdint>
#include <string>

#include "engine/device_peaks.h"

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

}  // namespace glass
