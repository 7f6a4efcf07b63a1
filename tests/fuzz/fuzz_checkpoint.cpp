// Fuzz target: checkpoint files (--resume FILE): safetensors plus the checkpoint's metadata
// (format, step, RNG state, configuration as JSON, optimizer scalars as JSON), train/checkpoint.h,
// then what a resume does with a checkpoint that loads: build the model its configuration
// describes, load its weights and the AdamW state.
#include "engine/error.h"
#include "engine/rng.h"
#include "fuzz_input.h"
#include "nn/gpt.h"
#include "optim/adamw.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "ckpt_00000001.safetensors");
  try {
    const glass::train::LoadedCheckpoint ck = glass::train::load_checkpoint(path);
    glass::Generator gen(1);
    glass::GPT model(ck.state.config, gen);
    model.load_state_dict(ck.model);
    glass::AdamW optimizer(model.named_parameters(), glass::AdamWOptions{});
    optimizer.load_state(ck.optimizer, ck.optimizer_scalars);
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
