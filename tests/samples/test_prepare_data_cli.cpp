// GPT-2 tokens end to end, as a user runs them: prepare_data turns text files into llm.c shards,
// train_gpt trains on the directory and samples decoded text after a prompt, and generate gives
// the same text from the saved weights. And a character model's weights carry their vocabulary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "cli_testing.h"
#include "tests/tokenizer/tokenizer_testing.h"
#include "train/data.h"

namespace {

using glass::testing::run_sample;
using glass::testing::scratch_path;

// The text between the "--- sample ..." line and the closing "---".
std::string sample_text(const std::string& out) {
  const auto start = out.find("--- sample");
  if (start == std::string::npos) return "(no sample in: " + out + ")";
  const auto body = out.find('\n', start) + 1;
  return out.substr(body, out.rfind("\n---") - body);
}

// generate's output without its last line, "generate: N tokens in ... tokens/s (...)" (stderr).
std::string generated_text(const std::string& out) {
  EXPECT_NE(out.find("tokens/s ("), std::string::npos) << out;
  return out.substr(0, out.rfind("generate: "));
}

TEST(PrepareDataCli, BadInputIsOneLine) {
  glass::testing::expect_one_line_error("prepare_data", "--input /nonexistent.txt --out /tmp/x",
                                        "/nonexistent.txt");
  glass::testing::expect_one_line_error("prepare_data", "--input x --out /tmp/x --val-fraction 1",
                                        "--val-fraction 1");
  glass::testing::expect_one_line_error("prepare_data", "--out /tmp/x", "--input");
  const std::string empty = scratch_path("empty.txt"), out = scratch_path("empty_out");
  std::ofstream(empty, std::ios::binary).flush();
  glass::testing::expect_one_line_error("prepare_data", "--input " + empty + " --out " + out,
                                        "is empty (0 bytes)");
  EXPECT_FALSE(std::filesystem::exists(out)) << "nothing is written for an empty input";
}

TEST(PrepareDataCli, ShardsThenTrainThenSampleDecodedText) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const std::string text = glass::testing::read_text(glass::testing::kTinyShakespeare, 12000);
  const std::string a = scratch_path("doc_a.txt"), b = scratch_path("doc_b.txt");
  std::ofstream(a, std::ios::binary) << text.substr(0, 7000);
  std::ofstream(b, std::ios::binary) << text.substr(7000);
  const std::string dir = scratch_path("shards");

  const auto prep = run_sample("prepare_data", "--input " + a + " " + b + " --out " + dir +
                                                   " --val-fraction 0.1 --shard-tokens 1000");
  ASSERT_EQ(prep.status, 0) << prep.out;
  // The shards hold <|endoftext|> before each document, then its tokens; val is the last tenth.
  const auto& tok = glass::train::Gpt2Tokenizer::standard();
  std::vector<int32_t> expected = {50256};
  for (const int32_t t : tok.encode(text.substr(0, 7000))) expected.push_back(t);
  expected.push_back(50256);
  for (const int32_t t : tok.encode(text.substr(7000))) expected.push_back(t);
  const glass::train::Dataset d = glass::train::load_shard_dir(dir, 0);
  EXPECT_EQ(d.vocab_size, 50257);  // from the gpt2_tokenizer.bin beside the shards
  std::vector<int32_t> all = d.train;
  all.insert(all.end(), d.val.begin(), d.val.end());
  EXPECT_EQ(all, expected);
  EXPECT_EQ(d.val.size(), expected.size() / 10);
  const size_t shards = (d.train.size() + 999) / 1000 + (d.val.size() + 999) / 1000;
  EXPECT_TRUE(std::filesystem::exists(dir + "/train_000000.bin"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/val_000000.bin"));
  EXPECT_NE(prep.out.find(fmt::format("2 documents, {} tokens ({} train, {} val) in {} shards",
                                      expected.size(), d.train.size(), d.val.size(), shards)),
            std::string::npos)
      << prep.out;
  EXPECT_NE(prep.out.find("100%"), std::string::npos) << prep.out;  // the progress bar

  // train_gpt on the directory, then a sample after a prompt, decoded to text.
  const std::string weights = scratch_path("gpt2_tokens.safetensors");
  const std::string model = "--n-layer 1 --n-head 2 --n-embd 32 --seq-len 32 --threads 1 ";
  const auto train = run_sample(
      "train_gpt", "--data " + dir + " " + model +
                       "--batch 4 --steps 8 --eval-every 0 --eval-batches 1 --quiet --sample 24 "
                       "--prompt 'ROMEO:' --temperature 0.9 --top-k 50 --seed 3 --save " +
                       weights);
  ASSERT_EQ(train.status, 0) << train.out;
  EXPECT_NE(train.out.find("--- sample: 24 gpt2 tokens"), std::string::npos) << train.out;
  EXPECT_NE(train.out.find("tokens/s (KV cache)"), std::string::npos) << train.out;
  const std::string sampled = sample_text(train.out);
  EXPECT_EQ(sampled.rfind("ROMEO:", 0), 0u) << sampled;
  EXPECT_GT(sampled.size(), 6u);

  // The same weights, prompt and seed through generate: the same text (and the KV cache and the
  // full context agree there too).
  const std::string gen_args = "--weights " + weights +
                               " --prompt 'ROMEO:' --sample 24 "
                               "--temperature 0.9 --top-k 50 --seed 3 --threads 1";
  const auto gen = run_sample("generate", gen_args);
  ASSERT_EQ(gen.status, 0) << gen.out;
  EXPECT_EQ(generated_text(gen.out), sampled + "\n");
  const auto full = run_sample("generate", gen_args + " --full-context");
  EXPECT_EQ(generated_text(full.out), generated_text(gen.out));
  EXPECT_NE(full.out.find("tokens/s (full context, f32)"), std::string::npos) << full.out;
}

// train_gpt on tinyshakespeare's characters, one thread, no validation: `args` add the model's
// shape, the steps, the sample and --save.
auto train_on_characters(const std::string& args) {
  return run_sample("train_gpt", "--data " + std::string(GLASS_SOURCE_DIR) +
                                     "/data/tinyshakespeare.txt --batch 4 --eval-every 0 "
                                     "--eval-batches 1 --quiet --threads 1 " +
                                     args);
}

TEST(GenerateCli, CharacterModelWeightsCarryTheirVocabulary) {
  const std::string weights = scratch_path("chars.safetensors");
  const auto train = train_on_characters(
      "--n-layer 1 --n-head 2 --n-embd 16 --seq-len 16 --steps 10 --sample 40 --seed 11 --save " +
      weights);
  ASSERT_EQ(train.status, 0) << train.out;
  const auto gen =
      run_sample("generate", "--weights " + weights + " --sample 40 --seed 11 --threads 1");
  ASSERT_EQ(gen.status, 0) << gen.out;
  EXPECT_EQ(generated_text(gen.out), sample_text(train.out) + "\n");
  glass::testing::expect_one_line_error("generate", "--weights /nonexistent.safetensors",
                                        "/nonexistent.safetensors");
}

// A model trained in bf16 and sampled by generate --dtype bf16: the same text as training's own
// sample, which read the same bf16 copies of the same masters (AdamW writes a copy as a cast of
// its master would; the file holds the f32 masters) through the same decoding. 300 tokens, past
// the block of 32 (the window re-run from there on): long enough that f32 draws another text
// from these weights, so the equality also says that --dtype bf16 took effect.
TEST(GenerateCli, Bf16SamplesWhatBf16TrainingSampled) {
  const std::string weights = scratch_path("chars_bf16.safetensors");
  const auto train = train_on_characters(
      "--n-layer 1 --n-head 2 --n-embd 32 --seq-len 32 --steps 6 --device cpu --dtype bf16 "
      "--sample 300 --seed 5 --save " +
      weights);
  ASSERT_EQ(train.status, 0) << train.out;
  const std::string args = "--weights " + weights + " --sample 300 --seed 5 --threads 1";
  const auto bf16 = run_sample("generate", args + " --dtype bf16");
  ASSERT_EQ(bf16.status, 0) << bf16.out;
  EXPECT_EQ(generated_text(bf16.out), sample_text(train.out) + "\n");
  EXPECT_NE(bf16.out.find("tokens/s (KV cache, bf16)"), std::string::npos) << bf16.out;
  const auto f32 = run_sample("generate", args);
  ASSERT_EQ(f32.status, 0) << f32.out;
  EXPECT_NE(generated_text(f32.out), generated_text(bf16.out))
      << "f32 drew the bf16 text: this test no longer tells them apart (change --seed)";
  glass::testing::expect_one_line_error("generate", args + " --dtype f16", "--dtype");
}

}  // namespace
