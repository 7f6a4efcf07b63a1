// --model gpt2: GPT-2 124M's shape (L=12, H=12, C=768, T=1024, V=50257 padded to 50304), its
// parameter count as llm.c counts it, and the clear errors when the flags or the data do not fit
// it. (Training it takes a GPU: scripts/gpu_check.sh.)
#include <gtest/gtest.h>

#include "tests/testing.h"
#include "train/gpt_cost.h"
#include "train_testing.h"

namespace glass::train {
namespace {

using testing::contains_all;
using testing::error_of;

TEST(Gpt2Preset, ShapeAndParameterCountAsLlmC) {
  const GPTConfig c = GPTConfig::gpt2();
  EXPECT_EQ(c.n_layer, 12);
  EXPECT_EQ(c.n_head, 12);
  EXPECT_EQ(c.n_embd, 768);
  EXPECT_EQ(c.block_size, 1024);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.table_rows(), 50304);
  EXPECT_EQ(c.table_rows() % 64, 0);
  // llm.c's train_gpt2 prints "num_parameters: 124475904" (padded vocabulary).
  EXPECT_EQ(gpt_num_parameters(c), 124475904);
  // The fast path's activations hold no T x T matrix: quadrupling the heads' count adds only the
  // log-sum-exps, 4 B H T bytes per layer.
  GPTConfig more_heads = c;
  more_heads.n_head = 48;
  const double base = gpt_memory_budget(c, 8, 1024, DType::bf16, {true}).activations_bytes;
  EXPECT_EQ(gpt_memory_budget(more_heads, 8, 1024, DType::bf16, {true}).activations_bytes - base,
            12.0 * 4 * 8 * 36 * 1024);
}

TEST(Gpt2Preset, FlagsOrDataThatDoNotFitAreClearErrors) {
  const std::string dir = testing::temp_dir("gpt2_preset");
  std::vector<uint16_t> tokens(4000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i * 37 % 50257);
  testing::write_bytes(dir + "/ok.bin", testing::shard_bytes(20240520, 1, 4000, tokens));
  tokens[17] = 50300;  // a padded row: not a GPT-2 token
  testing::write_bytes(dir + "/bad.bin", testing::shard_bytes(20240520, 1, 4000, tokens));

  TrainOptions o = testing::tiny_options();
  o.model = "gpt2";
  o.seq_len = 1024;
  // Text data has a character vocabulary, not GPT-2 tokens.
  EXPECT_TRUE(contains_all(error_of([&] { Trainer t(o); }), {"--model gpt2", "token shards"}));
  o.data = dir + "/ok.bin";
  o.vocab_size = 1000;
  EXPECT_TRUE(
      contains_all(error_of([&] { Trainer t(o); }),
                   {"--model gpt2 has a vocabulary of 50257 tokens", "--vocab-size is 1000"}));
  o.vocab_size = 0;
  o.seq_len = 2048;
  EXPECT_TRUE(contains_all(error_of([&] { Trainer t(o); }), {"--seq-len 2048", "block size 1024"}));
  o.seq_len = 1024;
  o.data = dir + "/bad.bin";
  EXPECT_TRUE(contains_all(error_of([&] { Trainer t(o); }),
                           {"bad.bin", "token 50300 at position 17", "vocab size 50257"}));
  o.model = "gpt3";
  EXPECT_TRUE(contains_all(error_of([&] { Trainer t(o); }), {"--model 'gpt3'", "gpt2"}));
}

}  // namespace
}  // namespace glass::train
