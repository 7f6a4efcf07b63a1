// Fuzz target: llm.c token shards (--data x.bin --vocab-size V), train/data.h, and the batches a
// step reads from them.
#include "engine/error.h"
#include "fuzz_input.h"
#include "train/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "tokens.bin");
  try {
    const glass::train::Dataset d = glass::train::load_dataset(path, 50257);
    const glass::train::BatchLoader loader(&d.train, 2, 4, false, 0);
    loader.batch(3, glass::kCPU);
  } catch (const glass::Error&) {
  }
  return 0;
}
