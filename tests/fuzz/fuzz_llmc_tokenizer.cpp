// Fuzz target: llm.c's gpt2_tokenizer.bin (train/tokenizer/gpt2_vocab.h), the decode table read
// beside llm.c token shards and by Gpt2Tokenizer::from_llmc_file. A table that loads must decode
// every id it holds, and refuse (glass::Error) the ids outside it.
#include <cstdint>
#include <vector>

#include "engine/error.h"
#include "fuzz_input.h"
#include "train/tokenizer/gpt2_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "gpt2_tokenizer.bin");
  try {
    const glass::train::Gpt2Tokenizer tok = glass::train::Gpt2Tokenizer::from_llmc_file(path);
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < tok.vocab_size(); ++i) ids.push_back(static_cast<int32_t>(i));
    if (tok.end_of_text() >= 0) ids.push_back(tok.end_of_text());
    tok.decode(ids);
    tok.decode({static_cast<int32_t>(tok.vocab_size())});  // must throw glass::Error
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
