// llama2.c's tokenizer.bin; see llama2c_tokenizer.h for the layout.
#include "nn/llama2c_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "engine/atomic_file.h"
#include "engine/error.h"

namespace glass {

namespace {

template <typename T>
void append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

std::string llama2c_tokenizer_bytes(const std::vector<std::string>& pieces,
                                    const std::vector<float>& scores) {
  GLASS_CHECK(scores.empty() || scores.size() == pieces.size(),
              "tokenizer.bin: {} scores for {} tokens", scores.size(), pieces.size());
  size_t longest = 0;
  for (const std::string& p : pieces) longest = std::max(longest, p.size());
  GLASS_CHECK(longest <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
              "tokenizer.bin: a token of {} bytes does not fit its int32 length", longest);
  std::string out;
  append(out, static_cast<int32_t>(longest));
  for (size_t i = 0; i < pieces.size(); ++i) {
    append(out, scores.empty() ? 0.0f : scores[i]);
    append(out, static_cast<int32_t>(pieces[i].size()));
    out += pieces[i];
  }
  return out;
}

void save_llama2c_tokenizer(const std::string& path, const std::vector<std::string>& pieces,
                            const std::vector<float>& scores) {
  write_file_atomic(path, llama2c_tokenizer_bytes(pieces, scores));
}

Llama2cTokenizer parse_llama2c_tokenizer(std::string_view bytes, int64_t vocab_size,
                                         const std::string& name) {
  size_t at = 0;
  // The next `n` bytes of the file as a T, or an error saying where the file ended.
  auto take = [&](auto& value, int64_t token, const char* what) {
    if (bytes.size() - at < sizeof(value)) {
      if (token < 0)
        fail("tokenizer.bin {}: {} bytes, too short for the int32 max_token_length", name,
             bytes.size());
      fail(
          "tokenizer.bin {}: truncated at token {}: its {} needs {} bytes at byte offset {}, but "
          "the file ends at {}",
          name, token, what, sizeof(value), at, bytes.size());
    }
    std::memcpy(&value, bytes.data() + at, sizeof(value));
    at += sizeof(value);
  };
  Llama2cTokenizer tok;
  take(tok.max_token_length, -1, "max_token_length");
  GLASS_CHECK(tok.max_token_length >= 0, "tokenizer.bin {}: max_token_length {} is negative", name,
              tok.max_token_length);
  for (int64_t i = 0; vocab_size < 0 ? at < bytes.size() : i < vocab_size; ++i) {
    float score = 0;
    int32_t length = 0;
    take(score, i, "score");
    const size_t length_at = at;
    take(length, i, "length");
    GLASS_CHECK(length >= 0 && length <= tok.max_token_length,
                "tokenizer.bin {}: token {} has length {} (byte offset {}), not in [0, "
                "max_token_length={}]",
                name, i, length, length_at, tok.max_token_length);
    GLASS_CHECK(bytes.size() - at >= static_cast<size_t>(length),
                "tokenizer.bin {}: truncated at token {}: its {} bytes start at byte offset {}, "
                "but the file ends at {}",
                name, i, length, at, bytes.size());
    tok.scores.push_back(score);
    tok.pieces.emplace_back(bytes.substr(at, static_cast<size_t>(length)));
    at += static_cast<size_t>(length);
  }
  GLASS_CHECK(
      at == bytes.size(),
      "tokenizer.bin {}: {} bytes after token {}, the last of vocab_size {} (byte offset {})", name,
      bytes.size() - at, vocab_size - 1, vocab_size, at);
  return tok;
}

Llama2cTokenizer load_llama2c_tokenizer(const std::string& path, int64_t vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenizer.bin {}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return parse_llama2c_tokenizer(bytes.str(), vocab_size, path);
}

std::string llama2c_tokenizer_path(const std::string& weights_path) {
  return (std::filesystem::path(weights_path).parent_path() / "tokenizer.bin").string();
}

}  // namespace glass
