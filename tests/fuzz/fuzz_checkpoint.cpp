// Fuzz target: checkpoint files (--resume FILE): safetensors plus the checkpoint's metadata
// (format, step, RNG state, configuration as JSON, optimizer scalars as JSON), train/checkpoint.h.
#include "engine/error.h"
#include "fuzz_input.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "ckpt_00000001.safetensors");
  try {
    const glass::train::LoadedCheckpoint ck = glass::train::load_checkpoint(path);
    ck.state.config.validate();  // what the trainer does next with the configuration
  } catch (const glass::Error&) {
  }
  return 0;
}
