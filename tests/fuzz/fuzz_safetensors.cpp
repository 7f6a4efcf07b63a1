// Fuzz target: safetensors weight files (--init, and what --save wrote), nn/safetensors.h.
#include "engine/error.h"
#include "fuzz_input.h"
#include "nn/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "weights.safetensors");
  try {
    glass::load_safetensors(path);
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
