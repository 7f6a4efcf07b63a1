// Checkpoints: resuming at step k and training to n gives the same bits as training to n at once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "autograd/ops.h"
#include "train/checkpoint.h"
#include "train_testing.h"

namespace glass::train {
namespace {

std::vector<std::vector<float>> weights(const Trainer& t) {
  std::vector<std::vector<float>> w;
  for (const auto& [name, p] : t.model().named_parameters()) w.push_back(to_vector<float>(p));
  return w;
}

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
  EXPECT_EQ(weights(part2), weights(straight));
  // And it is not trivially equal: the last three steps did move the weights.
  EXPECT_NE(weights(part1), weights(part2));
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
  EXPECT_EQ(weights(resumed), weights(full));
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
