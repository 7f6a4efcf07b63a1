// MFU (model FLOPs utilisation): the FLOPs the model needs per token times the tokens per second
// trained, over the device's peak FLOP/s. Model FLOPs, not hardware FLOPs: recomputation or
// padding does not count, so MFU compares fairly across implementations.
#pragma once

#include <string>

#include "engine/device_peaks.h"
#include "nn/gpt.h"

namespace glass::train {

struct Mfu {
  double flops_per_token = 0;
  double peak_flops = 0;
  std::string formula;  // how both numbers were obtained, to print once at start

  double of(double tokens_per_s) const { return flops_per_token * tokens_per_s / peak_flops; }
};

Mfu gpt_mfu(const GPTConfig& config, int64_t seq_len, const DevicePeaks& peaks, DType dtype);

}  // namespace glass::train
