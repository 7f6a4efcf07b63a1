// train_gpt --save-format and --init, and generate --weights, across weight layouts, as a user
// runs them.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "cli_testing.h"
#include "tests/tokenizer/tokenizer_testing.h"

namespace {

using glass::testing::Outcome;

using glass::testing::kTinyShakespeare;
const std::string kTinyQuiet =
    "--data " + kTinyShakespeare + " " + glass::testing::kTinyRunFlags + "--quiet ";

TEST(WeightsCli, SavesInEachLayoutAndStartsAgainFromIt) {
  for (const std::string format : {"hf", "llmc"}) {
    const std::string path = glass::testing::scratch_path("w." + format);
    const Outcome saved = glass::testing::run_sample(
        "train_gpt", kTinyQuiet + "--steps 1 --save " + path + " --save-format " + format);
    ASSERT_EQ(saved.status, 0) << saved.out;
    EXPECT_NE(saved.out.find("(" + format + " layout)"), std::string::npos) << saved.out;
    const Outcome again =
        glass::testing::run_sample("train_gpt", kTinyQuiet + "--steps 1 --init " + path);
    EXPECT_EQ(again.status, 0) << again.out;
  }
  glass::testing::expect_one_line_error("train_gpt", kTinyQuiet + "--steps 1 --save-format onnx",
                                        "--save-format");
  glass::testing::expect_one_line_error("train_gpt",
                                        "--data " + kTinyShakespeare +
                                            " --n-layer 3 --steps 1 --init " +
                                            glass::testing::scratch_path("w.llmc"),
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
        "train_gpt", kTinyQuiet + "--steps 3 --seed 5 --save " + path + " --save-format " + format);
    ASSERT_EQ(saved.status, 0) << saved.out;
    const std::string vocab =
        format == "llmc" ? " --tokenizer char --data " + kTinyShakespeare : "";
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

// A training checkpoint holds the weights under the same names (beside the optimizer's state): it
// starts a run with --init, and generate samples from it. It does not say its tokenizer, so
// generate asks for one, naming the data it was trained on.
TEST(WeightsCli, ACheckpointStartsTrainingAndGenerates) {
  const std::string dir = glass::testing::scratch_path("ck");
  const Outcome trained = glass::testing::run_sample(
      "train_gpt", kTinyQuiet + "--steps 2 --checkpoint-dir " + dir + " --checkpoint-every 2");
  ASSERT_EQ(trained.status, 0) << trained.out;
  const std::string ckpt = dir + "/ckpt_00000002.safetensors";
  const Outcome init =
      glass::testing::run_sample("train_gpt", kTinyQuiet + "--steps 1 --init " + ckpt);
  EXPECT_EQ(init.status, 0) << init.out;
  // The checkpoint keeps its characters ("char_vocab"), so it decodes without --data.
  const Outcome gen =
      glass::testing::run_sample("generate", "--weights " + ckpt + " --sample 20 --threads 1");
  EXPECT_EQ(gen.status, 0) << gen.out;
  EXPECT_NE(gen.out.find("generate: 20 tokens"), std::string::npos) << gen.out;
}

// A text of `chars` repeated: a vocabulary of its distinct characters.
std::string text_file(const std::string& name, const std::string& chars) {
  const std::string path = glass::testing::scratch_path(name);
  std::string text;
  while (text.size() < 4000) text += chars;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return path;
}

// generate --data must be the text the weights were trained on: compared with the vocabulary
// stored with them (a --save file, a checkpoint), or, where none is stored (llm.c's layout), with
// the model's number of classes.
TEST(GenerateCli, DataWithAnotherVocabularyIsAnErrorNamingBoth) {
  const std::string weights = glass::testing::scratch_path("vocab.glass");
  const Outcome saved =
      glass::testing::run_sample("train_gpt", kTinyQuiet + "--steps 1 --save " + weights);
  ASSERT_EQ(saved.status, 0) << saved.out;
  const std::string other = text_file("other.txt", "hello world\n");
  glass::testing::expect_one_line_error("generate", "--weights " + weights + " --data " + other,
                                        "--data " + other +
                                            " has a vocabulary of 9 characters, "
                                            "but " +
                                            weights + " was trained on another one of 65");
  const std::string dir = glass::testing::scratch_path("vocab_ck");
  ASSERT_EQ(glass::testing::run_sample("train_gpt", kTinyQuiet + "--steps 1 --checkpoint-dir " +
                                                        dir + " --checkpoint-every 1")
                .status,
            0);
  const std::string ckpt = dir + "/ckpt_00000001.safetensors";
  glass::testing::expect_one_line_error(
      "generate", "--weights " + ckpt + " --data " + other,
      "has a vocabulary of 9 characters, but " + ckpt + " was trained on another one of 65");
  const std::string llmc = glass::testing::scratch_path("vocab.bin");
  ASSERT_EQ(glass::testing::run_sample(
                "train_gpt", kTinyQuiet + "--steps 1 --save " + llmc + " --save-format llmc")
                .status,
            0);
  glass::testing::expect_one_line_error(
      "generate", "--weights " + llmc + " --tokenizer char --data " + other,
      "has 9 distinct characters, but the model in " + llmc + " has 65 classes");
  // Its own text is accepted.
  EXPECT_EQ(glass::testing::run_sample("generate", "--weights " + weights + " --data " +
                                                       kTinyShakespeare + " --sample 5 --threads 1")
                .status,
            0);
}

TEST(GenerateCli, ANegativeSampleCountNamesTheFlag) {
  glass::testing::expect_one_line_error(
      "generate", "--weights " + glass::testing::scratch_path("none.safetensors") + " --sample -5",
      "--sample -5: the number of tokens to generate must be >= 0");
}

TEST(GenerateCli, HelpShowsDefaults) {
  const Outcome r = glass::testing::run_sample("generate", "--help");
  EXPECT_EQ(r.status, 0) << r.out;
  for (const char* text : {"INT=200", "TEXT=cpu", "UINT=1337"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " in:\n" << r.out;
}

// Without metadata, llm.c's file is taken for a GPT-2 model: a character model's 65 classes cannot
// hold GPT-2's tokens, and the error says so.
TEST(GenerateCli, LlmcFileOfACharacterModelNeedsItsVocabulary) {
  GLASS_REQUIRE_GPT2_REFERENCE();
  const std::string path = glass::testing::scratch_path("chars.llmc");
  const Outcome saved = glass::testing::run_sample(
      "train_gpt", kTinyQuiet + "--steps 1 --save " + path + " --save-format llmc");
  ASSERT_EQ(saved.status, 0) << saved.out;
  glass::testing::expect_one_line_error("generate", "--weights " + path, "65 classes");
}

}  // namespace
