// The checkpoint directory over time: --keep-last N keeps the newest N and removes older ones only
// after a newer one is complete; a write that fails leaves `latest` and every older file alone;
// temp files of killed writers are cleared; `latest` holding anything but a file name is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "train/checkpoint.h"
#include "train_testing.h"

namespace glass::train {
namespace {

namespace fs = std::filesystem;

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

TEST(KeepLast, KeepsTheNewestN) {
  const std::string dir = testing::temp_dir("keep_last");
  TrainOptions o = testing::tiny_options();
  o.steps = 6;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 1;
  o.keep_last = 2;
  Trainer(o).run();
  EXPECT_EQ(files_in(dir), (std::set<std::string>{"ckpt_00000005.safetensors",
                                                  "ckpt_00000006.safetensors", "latest"}));
  EXPECT_EQ(latest_checkpoint_name(dir), "ckpt_00000006.safetensors");
}

TEST(KeepLast, ZeroKeepsAll) {
  const std::string dir = testing::temp_dir("keep_all");
  TrainOptions o = testing::tiny_options();
  o.steps = 4;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 1;
  o.keep_last = 0;
  Trainer(o).run();
  EXPECT_EQ(files_in(dir).size(), 5u);  // 4 checkpoints and latest
}

TEST(KeepLast, DefaultIsThree) { EXPECT_EQ(TrainOptions{}.keep_last, 3); }

TEST(KeepLast, AFailedWriteRemovesNothingAndLatestStays) {
  const std::string dir = testing::temp_dir("keep_last_fail");
  TrainOptions o = testing::tiny_options();
  o.steps = 3;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 1;
  o.keep_last = 2;
  Trainer t(o);
  t.run();  // ckpt 2 and 3 remain
  // Step 4's file cannot be published: a directory sits where it would go.
  fs::create_directories(dir + "/ckpt_00000004.safetensors/blocker");
  TrainOptions more = o;
  more.resume = dir;
  more.steps = 4;
  try {
    Trainer(more).run();
    FAIL() << "the blocked checkpoint write did not fail";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("checkpoint at step 4 was not written"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'latest' still names ckpt_00000003.safetensors"), std::string::npos) << msg;
  }
  EXPECT_EQ(files_in(dir),
            (std::set<std::string>{"ckpt_00000002.safetensors", "ckpt_00000003.safetensors",
                                   "ckpt_00000004.safetensors", "latest"}));
  EXPECT_EQ(load_checkpoint(dir).state.step, 3);
}

TEST(KeepLast, StaleTempFilesOfKilledWritersAreCleared) {
  const std::string dir = testing::temp_dir("stale_tmp");
  testing::write_bytes(dir + "/ckpt_00000009.safetensors.tmp.999999999", "half a checkpoint");
  testing::write_bytes(dir + "/latest.tmp.999999999", "ckpt_0000");
  testing::write_bytes(dir + "/notes.txt", "the user's own file");
  TrainOptions o = testing::tiny_options();
  o.steps = 1;
  o.checkpoint_dir = dir;
  Trainer(o).run();
  EXPECT_EQ(files_in(dir),
            (std::set<std::string>{"ckpt_00000001.safetensors", "latest", "notes.txt"}));
}

TEST(Latest, AnythingButAFileNameIsRefused) {
  const std::string dir = testing::temp_dir("latest_bad");
  for (const std::string bad : {"", "..", ".", "../etc/passwd", "sub/ckpt"}) {
    testing::write_bytes(dir + "/latest", bad + "\n");
    try {
      load_checkpoint(dir);
      FAIL() << "latest '" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace glass::train
