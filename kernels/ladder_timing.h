// The kernel-ladder timing harness: runs rungs of one op on one shape and measures them, for
// bench/ladder and profile_op's --variant. A rung's time is the sum of its launches' times as the
// launch gateway records them (glass::launch observers: wall time on cpu and emu, where a launch
// is synchronous), the median of `repeats` runs after `warmup` runs. FLOPs and bytes are those the
// launches declare in their LaunchInfo: the ideal bytes (each input read once, each output
// written once) and the op's FLOPs (2 M N K for matmul). On emu the times measure the emulator
// (fibers on the CPU), not a GPU: the ranking of the rungs there says little about a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/launch.h"
#include "engine/tensor.h"
#include "kernels/ladder.h"

namespace glass::kernels::ladder {

struct LadderRow {
  Op op;
  const Rung* rung;
  Shape shape;
  int repeats;
  double median_us, min_us;  // per run
  double flops, bytes;       // per run, from the launches' LaunchInfo
  double allocated_bytes;    // the most device memory the run allocated on top of its inputs
  ComputeUnit unit;          // of the run's launch with the most FLOPs: its compute roof
  double gb_per_s() const { return bytes / (median_us * 1e3); }
  double gflop_per_s() const { return flops / (median_us * 1e3); }
};

struct TimingOptions {
  int warmup = 1;
  int repeats = 5;
  uint64_t seed = 1;  // of the random inputs
  // The operands' dtype: f32, or for matmul, attention and rmsnorm bf16 (then only the rungs that
  // take it: Rung::bf16). In an f32 ladder attention's bf16-only rung gets the inputs rounded to
  // bf16.
  DType dtype = DType::f32;
};

// What a shape of `op` lists ("rows, cols" for softmax, layernorm and rmsnorm, "M, N, K", "B, H, T,
// D"), and the shape the tools time when given none.
const char* shape_names(Op op);
Shape default_shape(Op op);

// Times `rungs` (all of the op's rungs when empty; with bf16, all that take bf16; either way only
// those that take the shape: attention's Tensor Core rung takes head dims 32, 64, 128) of `op` on
// `device` (emu or cuda) with random inputs of `shape`: softmax, layernorm and rmsnorm
// [rows, cols], matmul [M, N, K] (A [M, K], B [K, N]), attention [B, H, T, D] (qkv [B, T, 3 H D]).
// Not thread-safe against launches from other threads (they would be counted).
std::vector<LadderRow> time_ladder(Op op, Device device, const Shape& shape,
                                   std::span<const int> rungs = {},
                                   const TimingOptions& options = {});

// The rows as a text table, one line per rung; the production rung is marked with '*'.
std::string ladder_table(std::span<const LadderRow> rows);

}  // namespace glass::kernels::ladder
