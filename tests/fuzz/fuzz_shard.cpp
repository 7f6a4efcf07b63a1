// Fuzz target: llm.c token shards (--data x.bin --vocab-size V), train/data.h, and the batches a
// step reads from them. GLASS_GPT2_VOCAB_DIR points nowhere, so that a shard of GPT-2's vocabulary
// does not load GPT-2's 50257-token encoder.json on every input (0.1 s each: 10 inputs/s); the
// tokenizer files have targets of their own (fuzz_gpt2_vocab, fuzz_llmc_tokenizer).
#include <cstdlib>

#include "engine/error.h"
#include "fuzz_input.h"
#include "train/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool no_vocabulary =
      ::setenv("GLASS_GPT2_VOCAB_DIR", "/nonexistent/glass-fuzz-vocab", 1) == 0;
  (void)no_vocabulary;
  const std::string path = glass::fuzz::write_input(data, size, "tokens.bin");
  try {
    const glass::train::Dataset d = glass::train::load_dataset(path, 50257);
    const glass::train::BatchLoader loader(&d.train, 2, 4, false, 0);
    loader.batch(3, glass::kCPU);
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
