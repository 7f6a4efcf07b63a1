// Checkpoints: resuming at step k and training to n gives the same bits as training to n at once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "autograd/ops.h"
#include "nn/safetensors.h"
#include "tests/testing.h"
#include "train/checkpoint.h"
#include "train_testing.h"

namespace glass::train {
namespace {

TEST(Resume, IsBitExact) {
  const std::string dir = testing::temp_dir("resume");
  TrainOptions o = testing::tiny_options();
  o.steps = 6;
  o.lr_schedule = "constant";  // then a shorter first run has the same learning rates
  Trainer straight(o);
  straight.run();

  TrainOptions first = o;
  first.steps = 3;
  first.checkpoint_dir = dir;
  Trainer part1(first);
  part1.run();

  TrainOptions second = o;
  second.resume = dir;
  Trainer part2(second);
  EXPECT_EQ(part2.step(), 3);
  part2.run();
  EXPECT_EQ(part2.step(), 6);
  EXPECT_EQ(testing::weights_of(part2), testing::weights_of(straight));
  // And it is not trivially equal: the last three steps did move the weights.
  EXPECT_NE(testing::weights_of(part1), testing::weights_of(part2));
}

TEST(Resume, CosineScheduleResumesBitExactToo) {
  const std::string dir = testing::temp_dir("resume_cosine");
  TrainOptions o = testing::tiny_options();
  o.steps = 5;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 2;
  Trainer full(o);
  full.run();
  // `latest` now names step 5; resume the step-2 checkpoint explicitly.
  TrainOptions r = o;
  r.checkpoint_dir.clear();
  r.checkpoint_every = 0;  // no directory, no checkpoints (an error otherwise)
  r.resume = dir + "/ckpt_00000002.safetensors";
  Trainer resumed(r);
  EXPECT_EQ(resumed.step(), 2);
  resumed.run();
  EXPECT_EQ(testing::weights_of(resumed), testing::weights_of(full));
}

// The checkpoint records the run's sequence length and the text's characters, which a resume
// checks its flags and data against (flags.shape_flags_given: what train_gpt's user typed).
TEST(Resume, FlagsGivenMustAgreeWithTheCheckpointDefaultsYield) {
  const std::string dir = testing::temp_dir("resume_flags");
  TrainOptions o = testing::tiny_options();  // n_layer 2, n_head 2, n_embd 16, seq_len 12
  o.steps = 2;
  o.checkpoint_dir = dir;
  Trainer(o).run();
  const LoadedCheckpoint ck = load_checkpoint(dir);
  EXPECT_EQ(ck.state.seq_len, 12);
  ASSERT_TRUE(ck.state.char_vocab.has_value());
  EXPECT_EQ(char_vocab_from_metadata(*ck.state.char_vocab).size(), 65);

  TrainOptions r = o;
  r.checkpoint_dir.clear();
  r.resume = dir;
  r.steps = 3;
  r.n_embd = 32;
  r.seq_len = 6;
  r.shape_flags_given = {"--n-embd"};
  EXPECT_TRUE(testing::contains_all(
      testing::error_of([&] { Trainer t(r); }),
      {"--resume " + ck.path + " holds a model with", "--n-embd is 32 (checkpoint: 16)"}));
  // Not given: the checkpoint's shape and sequence length win over the options' values.
  r.shape_flags_given.clear();
  const Trainer t(r);
  EXPECT_EQ(t.model().config.n_embd, 16);
  EXPECT_EQ(t.step(), 2);
  r.shape_flags_given = {"--seq-len"};
  EXPECT_TRUE(testing::contains_all(testing::error_of([&] { Trainer t2(r); }),
                                    {"--seq-len is 6 (checkpoint: 12)"}));
}

// A checkpoint from before seq_len and char_vocab were recorded resumes as it did: unchecked.
TEST(Resume, OlderCheckpointsWithoutTheRecordedRunStillResume) {
  const std::string dir = testing::temp_dir("resume_old");
  TrainOptions o = testing::tiny_options();
  o.steps = 2;
  o.checkpoint_dir = dir;
  Trainer(o).run();
  const std::string path = dir + "/ckpt_00000002.safetensors";
  SafeTensorsFile f = load_safetensors(path);
  f.metadata.erase("seq_len");
  f.metadata.erase("char_vocab");
  save_safetensors(path, f.tensors, f.metadata);
  const LoadedCheckpoint ck = load_checkpoint(dir);
  EXPECT_EQ(ck.state.seq_len, 0);
  EXPECT_FALSE(ck.state.char_vocab.has_value());
  TrainOptions r = o;
  r.checkpoint_dir.clear();
  r.resume = dir;
  r.steps = 3;
  Trainer t(r);
  t.run();
  EXPECT_EQ(t.step(), 3);
}

TEST(Checkpoint, TruncatedOrForeignFilesGiveClearErrors) {
  const std::string dir = testing::temp_dir("ckpt_bad");
  TrainOptions o = testing::tiny_options();
  o.steps = 1;
  o.checkpoint_dir = dir;
  Trainer t(o);
  t.run();
  const std::string path = dir + "/ckpt_00000001.safetensors";
  const auto size = std::filesystem::file_size(path);
  std::filesystem::copy_file(path, dir + "/cut.safetensors");
  std::filesystem::resize_file(dir + "/cut.safetensors", size / 2);
  EXPECT_THROW(load_checkpoint(dir + "/cut.safetensors"), Error);
  std::ofstream(dir + "/foreign.safetensors") << "definitely not a checkpoint";
  EXPECT_THROW(load_checkpoint(dir + "/foreign.safetensors"), Error);
  EXPECT_THROW(load_checkpoint(dir + "/missing"), Error);
  // An empty directory has nothing to resume.
  std::filesystem::create_directories(dir + "/empty");
  try {
    load_checkpoint(dir + "/empty");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no 'latest'"), std::string::npos) << e.what();
  }
  // The good checkpoint still loads.
  EXPECT_EQ(load_checkpoint(dir).state.step, 1);
}

}  // namespace
}  // namespace glass::train
