// Tokenizer: text <-> token ids, the one interface the samples encode prompts and decode samples
// through. Two kinds: the character vocabulary of a text file (train/data.h, CharVocab) and GPT-2's
// byte-level BPE (gpt2_tokenizer.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace glass::train {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;  // "char" | "gpt2"
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The bytes of the tokens, concatenated; throws naming an id outside the vocabulary.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
};

}  // namespace glass::train
