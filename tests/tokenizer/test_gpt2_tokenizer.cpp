// GPT-2's tokenizer against the reference JavaScript encoder of the npm package gpt-3-encoder (an
// independent implementation: its own regex engine, V8's, and its own BPE loop), and decode
// against encode on arbitrary bytes.
#include <random>

#include "engine/error.h"
#include "tests/tokenizer/tokenizer_testing.h"
#include "train/tokenizer/pretokenize.h"

namespace glass::train {
namespace {

using testing::reference_encode;

// Text of every kind the pre-tokenisation pattern and the merges treat differently.
std::vector<std::pair<std::string, std::string>> varied_texts() {
  return {
      {"tiny shakespeare (64 KiB)",
       testing::read_text(std::string(GLASS_SOURCE_DIR) + "/data/tinyshakespeare.txt", 65536)},
      {"accents", "Café, naïve façade; São Paulo, Ærøskøbing, Œuvre, Ångström, Dvořák, İstanbul."},
      {"CJK", "日本語のテキストです。中文文本，混合English和数字123。한국어 텍스트도 있습니다."},
      {"emoji",
       "I ❤️ 🍕! 👩‍👩‍👧‍👦 family 🇫🇷🇯🇵, thumbs 👍🏽 and "
       "🤖🤖🤖 "
       "robots"},
      {"numbers", "3.14159 1,000,000 2024-05-20 0x1F 12345678901234567890 ٣٤٥ Ⅻ ½ ²"},
      {"spaces and newlines",
       "a  b   c\n\n\nd \t\te    \n  \n\r\n  x\n\n\n\n    indented\n\t\ttabs   \n   "},
      {"contractions",
       "I'm sure you're right: he'll go, we've seen, she'd say it's fine. "
       "DON'T 'S 'Tis o'clock rock'n'roll ''quoted'' y'all'd've"},
      {"symbols", "<|endoftext|> #include <vector> a->b && c||d; x += 1; $5.00 @user ~/path"},
      {"no-break and other spaces", "a\u00a0b\u2009c\u3000d\u2003e"},
      {"empty", ""},
  };
}

TEST(Gpt2Tokenizer, IdsEqualTheReferenceEncoderOnVariedText) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const Gpt2Tokenizer& tok = Gpt2Tokenizer::standard();
  const auto cases = varied_texts();
  std::vector<std::string> texts;
  for (const auto& c : cases) texts.push_back(c.second);
  const auto expected = reference_encode(texts);
  ASSERT_EQ(expected.size(), cases.size());
  size_t total = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(cases[i].second);
    EXPECT_EQ(got, expected[i]) << cases[i].first;
    // decode is checked on ids it did not make: the reference's.
    EXPECT_EQ(tok.decode(expected[i]), cases[i].second) << cases[i].first;
    total += got.size();
  }
  EXPECT_GT(total, 10000u);  // the comparison saw real text
}

TEST(Gpt2Tokenizer, KnownIds) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const Gpt2Tokenizer& tok = Gpt2Tokenizer::standard();
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.end_of_text(), 50256);
  EXPECT_EQ(tok.decode({50256}), "<|endoftext|>");
  // "Hello world" is [15496, 995] in GPT-2 (OpenAI's tiktoken "gpt2" gives the same).
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int32_t>{15496, 995}));
}

TEST(Gpt2Tokenizer, DecodeOfEncodeIsIdentityOnArbitraryBytes) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const Gpt2Tokenizer& tok = Gpt2Tokenizer::standard();
  std::vector<std::string> inputs = {std::string("\xff\xfe\x00\x01", 4),
                                     "\xc3",
                                     "abc\x80"
                                     "def",
                                     "\xc0\xaf overlong",
                                     "\xed\xa0\x80 surrogate",
                                     "caf\xc3\xa9\xc3",
                                     "  \xf0\x9f\x98 cut emoji",
                                     "\x7f\x85\xa0",
                                     std::string(300, ' ') + "x",
                                     std::string(1000, 'a')};
  std::mt19937 rng(1337);
  for (int n = 0; n < 300; ++n) {
    std::string s(rng() % 200, '\0');
    // Mostly printable ASCII with runs of raw bytes, so that both the pattern and the gaps of
    // bytes that are not UTF-8 are exercised.
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 32 + rng() % 95);
    inputs.push_back(s);
  }
  for (const std::string& s : inputs) {
    const std::vector<int32_t> ids = tok.encode(s);
    ASSERT_EQ(tok.decode(ids), s) << "input of " << s.size() << " bytes";
  }
}

TEST(Gpt2Tokenizer, PiecesConcatenateToTheInput) {
  std::string joined;
  std::vector<std::string> pieces;
  const std::string text = "Hello, world!  It's 2024\n\n\xff\xfe ok \xe6\x97\xa5";
  gpt2_pretokenize(text, [&](std::string_view p) {
    pieces.emplace_back(p);
    joined += p;
  });
  EXPECT_EQ(joined, text);
  EXPECT_EQ(pieces,
            (std::vector<std::string>{"Hello", ",", " world", "!", " ", " It", "'s", " 2024",
                                      "\n\n", "\xff\xfe", " ok", " \xe6\x97\xa5"}));
}

TEST(Gpt2Tokenizer, LlmcTokenizerFileDecodesLikeEncoderJson) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const Gpt2Tokenizer& tok = Gpt2Tokenizer::standard();
  const Gpt2Tokenizer bin(parse_llmc_tokenizer(llmc_tokenizer_bytes(tok.tokens(), 50256)));
  EXPECT_FALSE(bin.can_encode());
  EXPECT_EQ(bin.end_of_text(), 50256);
  const std::string text = "Ceci n'est pas une pipe. 日本 🍕";
  const auto ids = tok.encode(text);
  EXPECT_EQ(bin.decode(ids), text);
  EXPECT_THROW(bin.encode("x"), glass::Error);
}

}  // namespace
}  // namespace glass::train

namespace glass::train {
namespace {

TEST(Gpt2Tokenizer, EncodingInChunksCutAtSafePointsEqualsEncodingAtOnce) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const Gpt2Tokenizer& tok = Gpt2Tokenizer::standard();
  std::string text =
      testing::read_text(std::string(GLASS_SOURCE_DIR) + "/data/tinyshakespeare.txt", 20000);
  text += "end.  \n\n  spaces\t\ttabs 日本 \xff\xfe x";
  std::vector<int32_t> chunked;
  size_t cuts = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t cut = gpt2_safe_cut(text, at + 97);  // small chunks: many cuts
    const auto ids = tok.encode(std::string_view(text).substr(at, cut - at));
    chunked.insert(chunked.end(), ids.begin(), ids.end());
    at = cut;
    ++cuts;
  }
  EXPECT_GT(cuts, 100u);
  EXPECT_EQ(chunked, tok.encode(text));
  // A cut anywhere else can change the pieces: "a\n\nb" is "a", "\n", "\n", "b" but its halves
  // "a\n\n" + "b" give "a", "\n\n", "b".
  EXPECT_NE(tok.encode("a\n\n").size() + tok.encode("b").size(), tok.encode("a\n\nb").size());
}

}  // namespace
}  // namespace glass::train

namespace glass::train {
namespace {

// A sample that stops inside a multi-byte character prints without it; complete characters and
// bytes that are invalid anyway stay.
TEST(PartialUtf8Tail, IsHeldBackAndNothingElse) {
  EXPECT_EQ(without_partial_utf8_tail("abc"), "abc");
  EXPECT_EQ(without_partial_utf8_tail(""), "");
  EXPECT_EQ(without_partial_utf8_tail("a\xC3"), "a");                      // 2-byte lead alone
  EXPECT_EQ(without_partial_utf8_tail("a\xC3\xA9"), "a\xC3\xA9");          // é complete
  EXPECT_EQ(without_partial_utf8_tail("a\xE2\x82"), "a");                  // € cut after 2 of 3
  EXPECT_EQ(without_partial_utf8_tail("a\xE2\x82\xAC"), "a\xE2\x82\xAC");  // € complete
  EXPECT_EQ(without_partial_utf8_tail("\xF0\x9F\x98"), "");                // emoji cut after 3 of 4
  EXPECT_EQ(without_partial_utf8_tail("x\xF0\x9F\x98\x80"), "x\xF0\x9F\x98\x80");
  EXPECT_EQ(without_partial_utf8_tail("a\x80"),
            "a\x80");  // a stray continuation byte: invalid anyway
}

// What generate decodes: GPT-2 spells the emoji as byte tokens, so a sample stopped one token
// early decodes to bytes that end inside it; the printed text ends at the last whole character.
TEST(PartialUtf8Tail, Gpt2TokensStoppedInsideACharacter) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const auto& tok = Gpt2Tokenizer::standard();
  const std::string text = "caf\xC3\xA9 \xF0\x9F\x98\x80";
  std::vector<int32_t> ids = tok.encode(text);
  ids.pop_back();
  const std::string bytes = tok.decode(ids);
  ASSERT_GT(bytes.size(), text.size() - 4) << "the last token is the whole emoji";
  ASSERT_LT(bytes.size(), text.size());
  EXPECT_EQ(without_partial_utf8_tail(bytes), text.substr(0, text.size() - 4));
}

}  // namespace
}  // namespace glass::train
