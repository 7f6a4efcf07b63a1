// Fuzz target: text data (--data x.txt; a file starting with the shard magic is read as a shard),
// train/data.h: the character vocabulary, the split, batches and decoding.
#include "engine/error.h"
#include "fuzz_input.h"
#include "train/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "text.txt");
  try {
    const glass::train::Dataset d = glass::train::load_dataset(path, 0);
    if (d.vocab) d.vocab->decode(d.train);
    const glass::train::BatchLoader loader(&d.train, 2, 3, true, 7);
    loader.batch(1, glass::kCPU);
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
