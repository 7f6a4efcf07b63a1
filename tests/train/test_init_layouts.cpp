// --init in every weight layout (nn/gpt_weights.h): the trainer starts from the file's weights
// whatever its layout, and a file whose shape disagrees with the flags is an error naming both.
#include <gtest/gtest.h>

#include "nn/gpt_weights.h"
#include "tests/testing.h"
#include "train_testing.h"

namespace glass::train {
namespace {

using testing::contains_all;
using testing::error_of;

TEST(InitLayouts, TrainerStartsFromTheSameWeightsInEachLayout) {
  const std::string dir = testing::temp_dir("init_layouts");
  TrainOptions o = testing::tiny_options();
  o.steps = 0;
  const Trainer source(o);  // a model of the tiny shape, seeded init
  for (WeightLayout layout : {WeightLayout::glass, WeightLayout::hf, WeightLayout::llmc}) {
    SCOPED_TRACE(weight_layout_name(layout));
    const std::string path = dir + "/w." + weight_layout_name(layout);
    save_gpt_weights(path, layout, source.model());
    TrainOptions from_file = o;
    from_file.init = path;
    from_file.seed = 4242;  // another seed: the weights must come from the file
    const Trainer t(from_file);
    EXPECT_EQ(t.model().config.str(), source.model().config.str());
    const NamedTensors want = source.model().named_parameters(), got = t.model().named_parameters();
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(testing::f32_values({want[i].second}), testing::f32_values({got[i].second}))
          << want[i].first;
  }
}

TEST(InitLayouts, AFileThatDisagreesWithTheFlagsIsAnErrorNamingBoth) {
  const std::string dir = testing::temp_dir("init_mismatch");
  TrainOptions o = testing::tiny_options();  // n_layer 2, n_head 2, n_embd 16
  o.steps = 0;
  const std::string path = dir + "/tiny.bin";
  save_gpt_weights(path, WeightLayout::llmc, Trainer(o).model());

  // --model gpt2: every field that differs, the file's value first.
  std::vector<uint16_t> tokens(2000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i * 37 % 50257);
  testing::write_bytes(dir + "/gpt2.bin", testing::shard_bytes(20240520, 1, 2000, tokens));
  TrainOptions gpt2 = o;
  gpt2.model = "gpt2";
  gpt2.data = dir + "/gpt2.bin";
  gpt2.seq_len = 1024;
  gpt2.init = path;
  EXPECT_TRUE(contains_all(error_of([&] { Trainer t(gpt2); }),
                           {"--init " + path, "llmc layout", "--model gpt2", "n_layer 2 vs 12",
                            "n_head 2 vs 12", "n_embd 16 vs 768", "vocab_size 65 vs 50257"}));

  // A shape flag given on the command line must agree with the file.
  TrainOptions flags = o;
  flags.init = path;
  flags.n_layer = 3;
  flags.shape_flags_given = {"--n-layer"};
  EXPECT_TRUE(contains_all(error_of([&] { Trainer t(flags); }),
                           {"--init " + path, "n_layer=2", "--n-layer is 3 (file: 2)"}));
  flags.n_layer = 2;
  flags.n_head = 4;
  flags.shape_flags_given = {"--n-head"};
  EXPECT_TRUE(contains_all(error_of([&] { Trainer t(flags); }), {"--n-head is 4 (file: 2)"}));
  // Not given: the defaults do not count, the file's shape wins.
  flags.shape_flags_given.clear();
  EXPECT_EQ(Trainer(flags).model().config.n_head, 2);
}

}  // namespace
}  // namespace glass::train
