// Fuzz target: llama2.c's tokenizer.bin (nn/llama2c_tokenizer.h), read beside a llama2c checkpoint
// by generate and the tests. A file that loads to its end must load again with its token count
// (as run.c reads it) to the same tokens, and must be refused with one token more.
#include <cstdint>

#include "engine/error.h"
#include "fuzz_input.h"
#include "nn/llama2c_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "tokenizer.bin");
  try {
    const glass::Llama2cTokenizer all = glass::load_llama2c_tokenizer(path);
    const auto n = static_cast<int64_t>(all.pieces.size());
    if (glass::load_llama2c_tokenizer(path, n).pieces != all.pieces) __builtin_trap();
    try {
      glass::load_llama2c_tokenizer(path, n + 1);
      __builtin_trap();  // one token more than the file holds must be an error
    } catch (const glass::Error&) {
    }
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
