// GPT-2's vocabulary files, parsed from their bytes (no file I/O here, so that each parser can be
// fed arbitrary input):
//
//   encoder.json  {"<token>": id, ...}: 50257 tokens. A token's bytes are written as characters
//                 through GPT-2's byte-to-unicode map (below), so that every byte is printable.
//   vocab.bpe     "#version: 0.2" and then one merge per line, "<left> <right>", in rank order
//                 (rank 0 first), both halves in the same byte-to-unicode spelling.
//   gpt2_tokenizer.bin  llm.c's decode table: uint32[256] header (magic 20240328, version 1 or 2,
//                 vocab size, and in version 2 the <|endoftext|> id), then per token one length
//                 byte (1..255) and that many bytes.
//
// The byte-to-unicode map: the 188 bytes that print as themselves in Latin-1 ('!'..'~', 0xA1..0xAC,
// 0xAE..0xFF) are their own code point; the other 68 (controls, space, 0x7F..0xA0, 0xAD) take code
// points 256, 257, ... in byte order.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glass::train {

// The code point byte b is written as in encoder.json and vocab.bpe.
char32_t gpt2_byte_to_unicode(uint8_t b);
// The inverse: the bytes of a token spelled in that map (UTF-8 text). Throws naming `what` when a
// character is not in the map or the text is not UTF-8.
std::string gpt2_unicode_to_bytes(std::string_view spelled, std::string_view what);

struct Gpt2Vocab {
  std::vector<std::string> tokens;                  // the bytes of token id i
  std::vector<std::pair<int32_t, int32_t>> merges;  // rank r: the ids of the pair merged
};

// encoder.json and vocab.bpe, as bytes. Checks: ids are 0..n-1 without gaps or repeats, each token
// distinct, all 256 single bytes are tokens, and each merge's halves and their concatenation are
// tokens. Errors name the file ("encoder.json" / "vocab.bpe"), the line or the token.
Gpt2Vocab parse_gpt2_vocab(std::string_view encoder_json, std::string_view vocab_bpe);

struct LlmcTokenizer {
  std::vector<std::string> tokens;
  int32_t eot = -1;  // -1 in version 1 files (which do not say)
};
constexpr uint32_t kLlmcTokenizerMagic = 20240328;
// gpt2_tokenizer.bin as bytes; throws naming the problem and its byte offset.
LlmcTokenizer parse_llmc_tokenizer(std::string_view bin);
// The version 2 file of these tokens (each 1..255 bytes long).
std::string llmc_tokenizer_bytes(const std::vector<std::string>& tokens, int32_t eot);

}  // namespace glass::train
