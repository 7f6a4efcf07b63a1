// train_gpt --save-format and --init, and generate --weights, across weight layouts, as a user
// runs them.
#include <gtest/gtest.h>

#include <map>

#include "cli_testing.h"
#include "tests/tokenizer/tokenizer_testing.h"

namespace {

using glass::testing::Outcome;

const std::string kData = std::string(GLASS_SOURCE_DIR) + "/data/tinyshakespeare.txt";
const std::string kTiny = "--data " + kData +
                          " --n-layer 1 --n-head 2 --n-embd 16 --seq-len 8 --batch 2 "
                          "--sample 0 --eval-every 0 --eval-batches 1 --threads 1 --quiet ";

TEST(WeightsCli, SavesInEachLayoutAndStartsAgainFromIt) {
  for (const std::string format : {"hf", "llmc"}) {
    const std::string path = glass::testing::scratch_path("w." + format);
    const Outcome saved = glass::testing::run_sample(
        "train_gpt", kTiny + "--steps 1 --save " + path + " --save-format " + format);
    ASSERT_EQ(saved.status, 0) << saved.out;
    EXPECT_NE(saved.out.find("(" + format + " layout)"), std::string::npos) << saved.out;
    const Outcome again =
        glass::testing::run_sample("train_gpt", kTiny + "--steps 1 --init " + path);
    EXPECT_EQ(again.status, 0) << again.out;
  }
  glass::testing::expect_one_line_error("train_gpt", kTiny + "--steps 1 --save-format onnx",
                                        "--save-format");
  glass::testing::expect_one_line_error(
      "train_gpt",
      "--data " + kData + " --n-layer 3 --steps 1 --init " + glass::testing::scratch_path("w.llmc"),
      "--n-layer is 3 (file: 1)");
}

// The same trained model saved in each layout (training is deterministic for a seed) samples the
// same text through generate. llm.c's file has no metadata: a character model's vocabulary is
// given with --tokenizer char --data, as a user of such a file would.
TEST(GenerateCli, SamplesTheSameTextFromEachLayout) {
  std::map<std::string, std::string> text;
  for (const std::string format : {"glass", "hf", "llmc"}) {
    const std::string path = glass::testing::scratch_path("gen." + format);
    const Outcome saved = glass::testing::run_sample(
        "train_gpt", kTiny + "--steps 3 --seed 5 --save " + path + " --save-format " + format);
    ASSERT_EQ(saved.status, 0) << saved.out;
    const std::string vocab = format == "llmc" ? " --tokenizer char --data " + kData : "";
    const Outcome gen = glass::testing::run_sample(
        "generate", "--weights " + path + vocab + " --sample 30 --seed 2 --threads 1");
    ASSERT_EQ(gen.status, 0) << format << ": " << gen.out;
    text[format] = gen.out.substr(0, gen.out.rfind("generate: "));
  }
  EXPECT_GT(text["glass"].size(), 20u) << text["glass"];
  EXPECT_EQ(text["hf"], text["glass"]);
  EXPECT_EQ(text["llmc"], text["glass"]);
  // llm.c's header says n_head=2; a different --n-head names both.
  glass::testing::expect_one_line_error(
      "generate", "--weights " + glass::testing::scratch_path("gen.llmc") + " --n-head 4",
      "--n-head 4 disagrees");
}

// Without metadata, llm.c's file is taken for a GPT-2 model: a character model's 65 classes cannot
// hold GPT-2's tokens, and the error says so.
TEST(GenerateCli, LlmcFileOfACharacterModelNeedsItsVocabulary) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const std::string path = glass::testing::scratch_path("chars.llmc");
  const Outcome saved = glass::testing::run_sample(
      "train_gpt", kTiny + "--steps 1 --save " + path + " --save-format llmc");
  ASSERT_EQ(saved.status, 0) << saved.out;
  glass::testing::expect_one_line_error("generate", "--weights " + path, "65 classes");
}

}  // namespace
