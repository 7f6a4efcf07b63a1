// profile_op --variant N|all: an operation's kernel ladder (kernels/ladder.h,
// docs/kernel_ladders.md) timed rung by rung on one device, with each rung's place under the
// roofline: time, GB/s, GFLOP/s, and the fraction of the device's roofline floor it reaches
// (floor = max(FLOPs / peak FLOP/s, bytes / peak bandwidth); fraction = floor / time). The peak
// FLOP/s is that of the unit the rung's launches name: the Tensor Cores' bf16 peak for the Tensor
// Core rung (where the device has one), the CUDA cores' f32 peak otherwise.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"

namespace glass::samples {

struct VariantRequest {
  Device device = kEmu;
  std::string operation;       // softmax | layernorm | matmul | attention | rmsnorm
  std::string variant;         // a rung's index or name, or "all"
  std::vector<int64_t> shape;  // softmax/layernorm/rmsnorm: rows,cols; matmul: M,K,N;
                               // attention: B,H,T,D; empty: a default
  int warmup = 1, repeats = 5;
  DType dtype = DType::f32;  // bf16: the rungs that take bf16 operands (matmul: cuBLAS, Tensor
                             // Cores; attention: flash, mma; rmsnorm: both)
};

// Times the rungs and returns {"table": text, "json": rows}. Throws glass::Error naming the
// operation, the variant or the device when they do not fit (the rungs are CUDA kernels: they
// run on emu and cuda, not on cpu).
struct VariantResult {
  std::string table;
  nlohmann::json json;
};
VariantResult time_variants(const VariantRequest& request);

}  // namespace glass::samples
