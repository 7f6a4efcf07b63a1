// Fuzz target: GPT-2's vocabulary files, encoder.json + vocab.bpe (train/tokenizer/gpt2_vocab.h),
// as Gpt2Tokenizer::from_dir reads them for prepare_data, generate and GPT-2 token shards. The
// input holds both files, split at its first NUL byte (encoder.json before it, vocab.bpe after;
// no NUL: an empty vocab.bpe). A vocabulary that loads must then encode and decode: decode(encode
// (x)) == x for a fixed text and for the input's own bytes, any other result is a finding.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "engine/error.h"
#include "fuzz_input.h"
#include "train/tokenizer/gpt2_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t json_size = nul == nullptr ? size : static_cast<size_t>(nul - data);
  const size_t bpe_at = nul == nullptr ? size : json_size + 1;
  glass::fuzz::write_input(data, json_size, "encoder.json");
  glass::fuzz::write_input(data + bpe_at, size - bpe_at, "vocab.bpe");
  try {
    const glass::train::Gpt2Tokenizer tok =
        glass::train::Gpt2Tokenizer::from_dir(glass::fuzz::scratch_dir());
    const std::string_view own(reinterpret_cast<const char*>(data), std::min<size_t>(size, 256));
    for (const std::string_view text :
         {std::string_view("Hello world, it's 2026!\n\n  x\xff"), own})
      if (tok.decode(tok.encode(text)) != text) std::abort();  // a vocabulary that loads must work
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
