#include <gtest/gtest.h>

#include <fstream>

#include "autograd/ops.h"
#include "nn/llama2c_tokenizer.h"
#include "train/data.h"
#include "train_testing.h"

namespace glass::train {
namespace {

using testing::shard_bytes;
using testing::write_bytes;

TEST(CharVocab, SortedUniqueCharactersRoundTrip) {
  const CharVocab v = CharVocab::from_text("hello world");
  EXPECT_EQ(v.chars(), " dehlorw");
  const auto ids = v.encode("world");
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 5, 6, 4, 1}));
  EXPECT_EQ(v.decode(ids), "world");
  EXPECT_THROW(v.encode("hat"), Error);
}

// llama2.c's tokenizer.bin holds a vocabulary as pieces: a character vocabulary's are its
// characters, and those pieces give the same vocabulary back; anything else is refused by token.
TEST(CharVocab, TokenPiecesRoundTripThroughLlama2csTokenizerBin) {
  const CharVocab v = CharVocab::from_text("hello world\n");
  const std::vector<std::string> pieces = token_pieces(v, v.size() + 2);
  EXPECT_EQ(pieces,
            (std::vector<std::string>{"\n", " ", "d", "e", "h", "l", "o", "r", "w", "", ""}));
  const std::vector<std::string> chars(pieces.begin(), pieces.begin() + v.size());
  EXPECT_EQ(char_vocab_from_pieces(chars).chars(), v.chars());
  const std::string path = testing::temp_dir("pieces") + "/tokenizer.bin";
  save_llama2c_tokenizer(path, chars);
  EXPECT_EQ(char_vocab_from_pieces(load_llama2c_tokenizer(path, v.size()).pieces).chars(),
            v.chars());
  auto error = [](const std::vector<std::string>& p) {
    try {
      char_vocab_from_pieces(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error({"a", "bc"}).find("token 1 is \"bc\""), std::string::npos) << error({"a", "bc"});
  EXPECT_NE(error({"b", "a"}).find("token 1"), std::string::npos);
  EXPECT_NE(error({"a", "a"}).find("sorted and distinct"), std::string::npos);
  EXPECT_NE(error({}).find("empty"), std::string::npos);
}

// A llama's character vocabulary reserves llama2.c's ids 0-2 (<unk>, <s>, </s>), which run.c
// treats as specials (it stops sampling at token 1): every character moves up by 3, the specials
// decode to nothing, tokenizer.bin names them as llama2.c's own does, and reading it back finds
// them again.
TEST(CharVocab, ALlamaVocabularyReservesLlama2csSpecialIds) {
  EXPECT_EQ(special_tokens(Arch::gpt2), 0);
  EXPECT_EQ(special_tokens(Arch::llama), 3);
  const CharVocab v = CharVocab::from_text("hello world\n", special_tokens(Arch::llama));
  EXPECT_EQ(v.size(), 3 + 9);
  EXPECT_EQ(v.encode("\nd"), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(v.decode({0, 1, 2, 3, 5}), "\nd");
  EXPECT_EQ(sample_context(v, ""), (std::vector<int32_t>{3}));  // the newline
  const std::vector<std::string> pieces = token_pieces(v, v.size());
  EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.begin() + 5),
            (std::vector<std::string>{"<unk>", "\n<s>\n", "\n</s>\n", "\n", " "}));
  const std::string path = testing::temp_dir("special_pieces") + "/tokenizer.bin";
  save_llama2c_tokenizer(path, pieces);
  const CharVocab back = char_vocab_from_pieces(load_llama2c_tokenizer(path, v.size()).pieces);
  EXPECT_EQ(back.specials(), 3);
  EXPECT_EQ(back.chars(), v.chars());

  Dataset d;
  d.vocab = CharVocab::from_text("ab");
  d.vocab_size = 2;
  d.train = {0, 1, 1};
  d.val = {0};
  reserve_special_tokens(d, Arch::gpt2);
  EXPECT_EQ(d.train, (std::vector<int32_t>{0, 1, 1}));
  reserve_special_tokens(d, Arch::llama);
  EXPECT_EQ(d.train, (std::vector<int32_t>{3, 4, 4}));
  EXPECT_EQ(d.val, (std::vector<int32_t>{3}));
  EXPECT_EQ(d.vocab_size, 5);
  EXPECT_EQ(d.tokenizer->decode(d.train), "abb");
  reserve_special_tokens(d, Arch::llama);  // once only
  EXPECT_EQ(d.train, (std::vector<int32_t>{3, 4, 4}));
}

TEST(Data, TinyShakespeareHasItsKnownVocabularyAndSplit) {
  const Dataset d = load_dataset(testing::tiny_options().data, 0);
  EXPECT_EQ(d.vocab_size, 65);
  EXPECT_EQ(d.train.size() + d.val.size(), 1115394u);
  EXPECT_EQ(d.val.size(), 111539u);
}

TEST(BatchLoader, SequentialStepsFollowTheDocumentedWindow) {
  std::vector<int32_t> tokens(50);
  for (int i = 0; i < 50; ++i) tokens[static_cast<size_t>(i)] = i;
  BatchLoader loader(&tokens, 2, 4, false, 0);
  // Step 1 reads tokens [8, 17): x rows 8..11 and 12..15, y shifted by one.
  const Batch b = loader.batch(1, kCPU);
  EXPECT_EQ(to_vector<int32_t>(b.x), (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(to_vector<int32_t>(b.y), (std::vector<int32_t>{9, 10, 11, 12, 13, 14, 15, 16}));
  // Step 6 starts at 48 and wraps at the end of the data.
  const Batch w = loader.batch(6, kCPU);
  EXPECT_EQ(to_vector<int32_t>(w.x), (std::vector<int32_t>{48, 49, 0, 1, 2, 3, 4, 5}));
  // A row range is the same rows of the full batch.
  const Batch r = loader.rows(1, 1, 2, kCPU);
  EXPECT_EQ(to_vector<int32_t>(r.x), (std::vector<int32_t>{12, 13, 14, 15}));
}

TEST(BatchLoader, ShuffledBatchesAreDeterministicAndDiffer) {
  std::vector<int32_t> tokens(1000);
  for (int i = 0; i < 1000; ++i) tokens[static_cast<size_t>(i)] = i;
  BatchLoader a(&tokens, 4, 8, true, 7), b(&tokens, 4, 8, true, 7), c(&tokens, 4, 8, true, 8);
  EXPECT_EQ(to_vector<int32_t>(a.batch(3, kCPU).x), to_vector<int32_t>(b.batch(3, kCPU).x));
  EXPECT_NE(to_vector<int32_t>(a.batch(3, kCPU).x), to_vector<int32_t>(c.batch(3, kCPU).x));
  const auto x = to_vector<int32_t>(a.batch(3, kCPU).x), y = to_vector<int32_t>(a.batch(3, kCPU).y);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] + 1);
}

TEST(Shard, ReadsValidShard) {
  const std::string dir = testing::temp_dir("shard_ok");
  write_bytes(dir + "/ok.bin", shard_bytes(20240520, 1, 5, {3, 1, 4, 1, 5}));
  EXPECT_EQ(read_shard(dir + "/ok.bin", 10), (std::vector<int32_t>{3, 1, 4, 1, 5}));
  const Dataset d = load_dataset(dir + "/ok.bin", 10, 0.2);
  EXPECT_EQ(d.train.size(), 4u);
  EXPECT_FALSE(d.vocab.has_value());
}

void expect_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    FAIL() << "expected an error containing '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Shard, CorruptShardsGiveClearErrors) {
  const std::string dir = testing::temp_dir("shard_bad");
  write_bytes(dir + "/magic.bin", shard_bytes(1234, 1, 2, {1, 2}));
  expect_error([&] { load_dataset(dir + "/magic.bin", 10); }, "bad magic 1234");
  write_bytes(dir + "/version.bin", shard_bytes(20240520, 7, 2, {1, 2}));
  expect_error([&] { read_shard(dir + "/version.bin", 10); }, "unsupported version 7");
  write_bytes(dir + "/short.bin", shard_bytes(20240520, 1, 5, {1, 2}));
  expect_error([&] { read_shard(dir + "/short.bin", 10); }, "header says 5 tokens");
  write_bytes(dir + "/tiny.bin", "abc");
  expect_error([&] { read_shard(dir + "/tiny.bin", 10); }, "shorter than the 1024-byte header");
  write_bytes(dir + "/range.bin", shard_bytes(20240520, 1, 2, {1, 12}));
  expect_error([&] { read_shard(dir + "/range.bin", 10); }, "token 12 at position 1");
  expect_error([&] { load_dataset(dir + "/missing.bin", 10); }, "cannot open data file");
}

}  // namespace
}  // namespace glass::train
