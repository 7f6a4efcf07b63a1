// Training data: token streams from plain text (character vocabulary) or llm.c token shards, and
// the batches a training step reads.
//
// Batches are a pure function of the step number (and the seed, with shuffling), so a resumed run
// reads exactly the batches the uninterrupted run would have read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "nn/gpt_config.h"
#include "train/tokenizer/tokenizer.h"

namespace glass::train {

// The sorted distinct bytes of a text; token id = position in that list, after `specials` leading
// ids that no character has. A llama's vocabulary reserves three (special_tokens): llama2.c's
// <unk>, <s> and </s> at ids 0, 1 and 2, because run.c starts every sequence with token 1 and stops
// when it draws it; in a plain character vocabulary id 1 would be a character (the space in Tiny
// Shakespeare) and run.c's sample would end at the first one. glass never trains on the special
// ids: they decode to nothing.
class CharVocab : public Tokenizer {
 public:
  static CharVocab from_text(const std::string& text, int32_t specials = 0);
  int64_t size() const { return specials_ + static_cast<int64_t>(chars_.size()); }
  std::string name() const override { return "char"; }
  int64_t vocab_size() const override { return size(); }
  // Throws naming the first character that is not in the vocabulary.
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  const std::string& chars() const { return chars_; }
  int32_t specials() const { return specials_; }
  // The same characters after `specials` reserved ids.
  CharVocab with_specials(int32_t specials) const { return from_text(chars_, specials); }

 private:
  std::string chars_;
  int32_t specials_ = 0;
  int32_t index_[256];
};

// The reserved ids a character vocabulary starts with for `arch`: 3 for llama (above), 0 for gpt2.
int32_t special_tokens(Arch arch);
// llama2.c's texts of the reserved ids, as its tokenizer.bin holds them.
inline constexpr const char* kLlamaSpecialPieces[] = {"<unk>", "\n<s>\n", "\n</s>\n"};

// A character vocabulary as text for a weights file's metadata (its characters in hex, so that any
// bytes fit in JSON), and back.
std::string char_vocab_metadata(const CharVocab& vocab);
CharVocab char_vocab_from_metadata(const std::string& hex);

// A vocabulary as llama2.c's tokenizer.bin holds it (nn/llama2c_tokenizer.h): the bytes of each
// token id in [0, n), decoded one at a time (a character vocabulary's reserved ids: their
// kLlamaSpecialPieces); ids at or past the tokenizer's vocab_size (classes a model has beyond its
// data's tokens) are "".
std::vector<std::string> token_pieces(const Tokenizer& tokenizer, int64_t n);
// The character vocabulary whose token_pieces these are: llama2.c's three reserved pieces or none,
// then one byte each, sorted and distinct; else an error naming the first token that is not.
CharVocab char_vocab_from_pieces(const std::vector<std::string>& pieces);

// The tokens a sample continues: `prompt` encoded (throws naming a character the vocabulary
// lacks), or, for an empty prompt, the start of a line (characters: a newline, or the first
// character when there is none) or of a document (GPT-2's <|endoftext|>).
std::vector<int32_t> sample_context(const Tokenizer& tokenizer, std::string_view prompt);

struct Dataset {
  std::string path;
  std::vector<int32_t> train, val;  // token ids; val is the held-out tail
  int64_t vocab_size = 0;
  std::optional<CharVocab> vocab;  // set for text data
  // What the tokens are: the character vocabulary of text data; GPT-2's BPE for GPT-2 token shards
  // (vocab_size 50257) when its vocabulary or a gpt2_tokenizer.bin is found; else null.
  std::shared_ptr<const Tokenizer> tokenizer;
};

// A text file: character vocabulary; the last `val_fraction` of the tokens is held out.
Dataset load_text(const std::string& path, double val_fraction = 0.1);
// Text data for a model of `arch`: its vocabulary gets special_tokens(arch) reserved ids and every
// token id moves up by as many. Token data is left as it is (its ids are its tokenizer's).
void reserve_special_tokens(Dataset& data, Arch arch);
// An llm.c shard (int32[256] header: magic 20240520, version 1, token count; uint16 tokens).
// Every token must be < vocab_size. Throws naming the file and the problem.
std::vector<int32_t> read_shard(const std::string& path, int64_t vocab_size);
Dataset load_shard(const std::string& path, int64_t vocab_size, double val_fraction = 0.1);
// The file of `tokens` (each < 65536) as an llm.c shard, written atomically.
void write_shard(const std::string& path, const std::vector<int32_t>& tokens);
// A directory of shards as samples/prepare_data writes it: DIR/train_*.bin (in name order) are the
// training split, DIR/val_*.bin the held-out one (none: no validation). The vocabulary size is
// that of DIR/gpt2_tokenizer.bin when vocab_size is 0.
Dataset load_shard_dir(const std::string& dir, int64_t vocab_size);
// A directory of shards, a shard (name ends in .bin or the file starts with the shard magic), or
// text.
Dataset load_dataset(const std::string& path, int64_t vocab_size, double val_fraction = 0.1);

struct Batch {
  Tensor x, y;  // i32 [B, T]; y is x shifted by one token
};

// Step s without shuffling reads tokens [s*B*T, (s+1)*B*T + 1) of the stream, wrapping at its end.
// With shuffling, row b of step s starts at a Philox-random position (seed, s*B + b).
class BatchLoader {
 public:
  BatchLoader(const std::vector<int32_t>* tokens, int64_t batch, int64_t seq_len, bool shuffle,
              uint64_t seed);
  Batch batch(int64_t step, Device device) const;
  // Rows [row_begin, row_end) of step s's batch (data parallelism reads its share).
  Batch rows(int64_t step, int64_t row_begin, int64_t row_end, Device device) const;
  int64_t batch_size() const { return batch_; }
  int64_t seq_len() const { return seq_len_; }

 private:
  const std::vector<int32_t>* tokens_;
  int64_t batch_, seq_len_;
  bool shuffle_;
  uint64_t seed_;
};

}  // namespace glass::train
