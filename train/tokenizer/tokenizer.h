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

// `text` without a UTF-8 character cut off at its end: a lead byte followed by fewer continuation
// bytes than it announces (a byte-level BPE sample may stop inside a character). Printing holds
// those bytes back, as they would complete only with tokens that never come. Bytes that are not
// valid UTF-8 anyway are left as they are.
inline std::string_view without_partial_utf8_tail(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for the lead
    const size_t length = (c & 0xE0) == 0xC0   ? 2
                          : (c & 0xF0) == 0xE0 ? 3
                          : (c & 0xF8) == 0xF0 ? 4
                                               : 1;
    return length > back ? text.substr(0, n - back) : text;
  }
  return text;
}

}  // namespace glass::train
