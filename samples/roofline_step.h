// roofline step: one training step of a GPT planned on the `meta` device (train/step_plan.h) and
// drawn against a GPU's roofs (train/step_roofline.h), printed as tables or as JSON.
#pragma once

#include <string>

#include "nn/gpt.h"

namespace glass::samples {

struct RooflineStepFlags {
  GPTConfig config;
  std::string model;  // "gpt2" or "" (the shape flags)
  int64_t batch = 8, seq_len = 1024;
  std::string dtype = "bf16";
  std::string gpu = "h200";
  std::string attention = "auto";  // passed to the model as train_gpt --attention
  bool tf32 = false;
  bool json = false;
  bool every_launch = false;  // --launches: every launch, not only the top ones
  int top = 10;
};

// Plans the step and prints it to stdout; throws glass::Error on bad flags.
void roofline_step(const RooflineStepFlags& flags);

}  // namespace glass::samples
