// llama2.c's tokenizer.bin: the vocabulary run.c decodes (and encodes prompts with), written beside
// a --save-format llama2c checkpoint so that run.c samples text from a glass model.
//
//   int32 max_token_length
//   then for each of the model's vocab_size tokens, in id order:
//     f32 score (run.c's BPE merges the adjacent pair whose merged token scores highest),
//     int32 length, `length` bytes (the token's text, no terminator)
//
// The file does not say how many tokens it holds: run.c reads the model's vocab_size of them.
// glass's character vocabularies (train/data.h) have one single-byte token per character and no
// merges, so every score is 0.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace glass {

struct Llama2cTokenizer {
  int32_t max_token_length = 0;
  std::vector<std::string> pieces;  // token id -> its bytes
  std::vector<float> scores;
};

// The file for `pieces` (token id order) with `scores` (empty: all 0). max_token_length is the
// longest piece's length.
std::string llama2c_tokenizer_bytes(const std::vector<std::string>& pieces,
                                    const std::vector<float>& scores = {});
// Writes it to `path`, atomically (engine/atomic_file.h).
void save_llama2c_tokenizer(const std::string& path, const std::vector<std::string>& pieces,
                            const std::vector<float>& scores = {});

// Reads `vocab_size` tokens (as run.c does), or every token to the end of the file when vocab_size
// is negative; with vocab_size given, bytes after the last token are an error. A file that ends
// inside a token, a negative length, or a length beyond max_token_length is an error naming `name`,
// the token index and the byte offset.
Llama2cTokenizer parse_llama2c_tokenizer(std::string_view bytes, int64_t vocab_size,
                                         const std::string& name);
Llama2cTokenizer load_llama2c_tokenizer(const std::string& path, int64_t vocab_size = -1);

// "tokenizer.bin" in the directory of `weights_path`: where --save-format llama2c puts it.
std::string llama2c_tokenizer_path(const std::string& weights_path);

}  // namespace glass
