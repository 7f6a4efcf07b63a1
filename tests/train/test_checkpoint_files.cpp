// The checkpoint directory over time: --keep-last N keeps the newest N and removes older ones only
// after a newer one is complete; a write that fails leaves `latest` and every older file alone;
// temp files of killed writers are cleared; `latest` holding anything but a file name is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "nn/llama_state.h"
#include "nn/safetensors.h"
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

// A llama's configuration (arch, n_kv_head, ffn_hidden, rope_theta, norm_eps, tie_embeddings)
// round-trips through a checkpoint's "config" metadata, and its tensors are checked by name and
// shape against it before anything is allocated. (The file is written here as save_checkpoint
// writes it, with its metadata keys.)
TEST(LlamaCheckpoint, ConfigRoundTripsAndEachTensorIsChecked) {
  using glass::testing::contains_all, glass::testing::error_of, glass::testing::scratch_path;
  const GPTConfig c{.vocab_size = 11,
                    .block_size = 8,
                    .n_layer = 2,
                    .n_head = 4,
                    .n_embd = 16,
                    .dropout = 0,
                    .padded_vocab_size = 16,
                    .arch = Arch::llama,
                    .n_kv_head = 2,
                    .ffn_hidden = 24,
                    .rope_theta = 500000,
                    .norm_eps = 1e-6,
                    .tie_embeddings = false};
  const std::string dir = scratch_path("llama_ckpt");
  fs::create_directories(dir);
  auto write = [&](const NamedTensors& model) {
    NamedTensors tensors;
    for (const auto& [name, t] : model) tensors.emplace_back("model." + name, t);
    save_safetensors(dir + "/ckpt_00000003.safetensors", tensors,
                     {{"format", std::string(kCheckpointFormat)},
                      {"step", "3"},
                      {"rng_seed", "1"},
                      {"rng_offset", "0"},
                      {"data_position", "0"},
                      {"config", config_metadata(c)},
                      {"optimizer", "adamw"},
                      {"optimizer_scalars", "{}"},
                      {"data_path", "x.txt"},
                      {"seq_len", "8"}});
    return dir + "/ckpt_00000003.safetensors";
  };
  NamedTensors model;
  for (const auto& [name, shape] : llama_parameter_shapes(c))
    model.emplace_back(name, zeros(shape));
  const LoadedCheckpoint ck = load_checkpoint(write(model));
  EXPECT_EQ(ck.state.config.str(), c.str());
  EXPECT_EQ(ck.state.config.arch, Arch::llama);
  EXPECT_EQ(ck.state.config.rope_theta, 500000);
  EXPECT_EQ(ck.model.size(), model.size());
  model[3].second = zeros({16, 16});  // layer 0's o_proj is right; its qkv_proj [32, 16] is not
  model[2].second = zeros({40, 16});
  EXPECT_TRUE(contains_all(error_of([&] { load_checkpoint(write(model)); }),
                           {"model.layers.0.self_attn.qkv_proj.weight", "[40, 16]", "[32, 16]"}));
}

}  // namespace
}  // namespace glass::train
