// MFU (model FLOPs utilisation): the FLOPs the model needs per token times the tokens per second
// trained, over the device's peak FLOP/s. Model FLOPs, not hardware FLOPs: recomputation or
// padding does not count, so MFU compares fairly across implementations. HFU (hardware FLOPs
// utilisation) counts what the device actually computes: the model's FLOPs plus the forward that
// --recompute runs again in backward (train/gpt_cost.h, recompute_flops_per_token).
#pragma once

#include <string>

#include "engine/device_peaks.h"
#include "nn/gpt.h"
#include "nn/recompute.h"

namespace glass::train {

struct Mfu {
  double flops_per_token = 0;
  double recomputed_flops_per_token = 0;  // hardware FLOPs = model FLOPs + these
  double peak_flops = 0;
  std::string formula;  // how both numbers were obtained, to print once at start

  double of(double tokens_per_s) const { return flops_per_token * tokens_per_s / peak_flops; }
  double hfu_of(double tokens_per_s) const {
    return (flops_per_token + recomputed_flops_per_token) * tokens_per_s / peak_flops;
  }
};

Mfu gpt_mfu(const GPTConfig& config, int64_t seq_len, const DevicePeaks& peaks, DType dtype);
// The same with the recomputed forward of `mode` counted for HFU (and said in the formula);
// gelu_in_gemm_epilogue: --recompute gelu runs the c_fc GEMM again to rebuild GPT-2's GELU output
// (emu and cuda, whose GELU is the GEMM's epilogue, and cpu in bf16, whose GELU reads the GEMM's
// unrounded sum; autograd/matmul.cpp).
Mfu with_recompute(Mfu mfu, const GPTConfig& config, int64_t seq_len, Recompute mode,
                   bool gelu_in_gemm_epilogue);

}  // namespace glass::train
