// train_gpt --save-format and --init across weight layouts, as a user runs them.
#include <gtest/gtest.h>

#include "cli_testing.h"

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

}  // namespace
