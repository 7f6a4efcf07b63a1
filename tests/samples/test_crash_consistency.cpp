// Crash consistency of train_gpt's checkpoints, as a user meets it:
// - SIGKILL at >= 20 seeded random instants (start-up, steps, checkpoint writes), resuming each
//   time: every resume finds a loadable checkpoint no older than the last one seen, and the final
//   weights equal an uninterrupted run's bit for bit;
// - a checkpoint write that runs out of space (RLIMIT_FSIZE) ends with a clear error and leaves
//   `latest` naming the previous good checkpoint;
// - SIGINT / SIGTERM finish the step, write a checkpoint, say where, and exit 130 / 143.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "cli_testing.h"
#include "nn/safetensors.h"
#include "train/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using glass::testing::file_bytes;
using glass::testing::scratch_path;
using glass::testing::spawn_sample;
using glass::testing::wait_status;

using glass::testing::kTinyShakespeare;

// A tiny model (one thread, dropout on so the RNG state must survive too), a checkpoint after
// every step so that kills land in writes often.
std::vector<std::string> tiny_args(int steps, const std::string& dir, const std::string& save) {
  return {"--device",
          "cpu",
          "--data",
          kTinyShakespeare,
          "--n-layer",
          "1",
          "--n-head",
          "2",
          "--n-embd",
          "16",
          "--seq-len",
          "8",
          "--batch",
          "2",
          "--dropout",
          "0.1",
          "--sample",
          "0",
          "--eval-every",
          "0",
          "--eval-batches",
          "1",
          "--threads",
          "1",
          "--quiet",
          "--steps",
          std::to_string(steps),
          "--checkpoint-dir",
          dir,
          "--checkpoint-every",
          "1",
          "--save",
          save};
}

// Every tensor of two weight files, byte for byte.
void expect_same_weights(const std::string& a, const std::string& b) {
  const glass::SafeTensorsFile fa = glass::load_safetensors(a), fb = glass::load_safetensors(b);
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (size_t i = 0; i < fa.tensors.size(); ++i) {
    const auto& [name, ta] = fa.tensors[i];
    const glass::Tensor& tb = fb.at(name);
    ASSERT_EQ(ta.nbytes(), tb.nbytes()) << name;
    EXPECT_EQ(std::memcmp(ta.raw_data(), tb.raw_data(), ta.nbytes()), 0) << name << " differs";
  }
}

bool has_temp_file(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  return false;
}

TEST(CrashConsistency, KillNineAtRandomInstantsThenResumeIsBitExact) {
  constexpr int kSteps = 60, kMinKills = 20;
  const std::string ref_dir = scratch_path("kill_ref"), dir = scratch_path("kill_ckpt");
  fs::remove_all(ref_dir);
  fs::remove_all(dir);
  const std::string ref_weights = scratch_path("kill_ref.safetensors");
  const std::string weights = scratch_path("kill_resumed.safetensors");
  const std::string log = scratch_path("kill.log");

  // 1. The uninterrupted run, timed: kill instants are drawn over its length.
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t ref = spawn_sample("train_gpt", tiny_args(kSteps, ref_dir, ref_weights), log);
  ASSERT_EQ(wait_status(ref), 0) << file_bytes(log);
  const double run_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  // 2. Kill, look, resume, until at least kMinKills kills have landed; then let it finish.
  std::mt19937 rng(20261203);
  std::uniform_real_distribution<double> instant(0.0, 0.8 * run_ms);
  int kills = 0, kills_mid_write = 0, attempts = 0;
  int64_t last_step = -1;  // the step of the newest checkpoint seen so far (-1: none yet)
  for (;; ++attempts) {
    ASSERT_LT(attempts, 200) << "the run never finished";
    std::vector<std::string> args = tiny_args(kSteps, dir, weights);
    if (fs::exists(dir + "/latest")) {
      // Every resume finds a loadable checkpoint, never older than one already seen.
      glass::train::LoadedCheckpoint ck;
      ASSERT_NO_THROW(ck = glass::train::load_checkpoint(dir)) << "after kill " << kills;
      EXPECT_GE(ck.state.step, last_step) << "after kill " << kills;
      last_step = ck.state.step;
      args.insert(args.end(), {"--resume", dir});
    } else {
      ASSERT_EQ(last_step, -1) << "`latest` vanished after kill " << kills;
    }
    const pid_t pid = spawn_sample("train_gpt", args, log);
    if (kills >= kMinKills) {
      ASSERT_EQ(wait_status(pid), 0) << file_bytes(log);
      break;
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(instant(rng)));
    kill(pid, SIGKILL);
    const int status = wait_status(pid);
    if (status == 0) {
      // It finished before the instant came (a resumed run has fewer steps left): the result must
      // already be the uninterrupted run's; then start over from nothing for the remaining kills.
      expect_same_weights(weights, ref_weights);
      fs::remove_all(dir);
      fs::remove(weights);
      last_step = -1;
      continue;
    }
    ASSERT_EQ(status, -SIGKILL) << file_bytes(log);
    ++kills;
    if (fs::exists(dir) && has_temp_file(dir)) ++kills_mid_write;
  }
  EXPECT_GE(kills, kMinKills);
  std::printf("%d kills (%d inside a checkpoint write), newest checkpoint seen: step %lld\n", kills,
              kills_mid_write, static_cast<long long>(last_step));
  // 3. The same bits as the run that was never interrupted, and a checkpoint of the last step.
  expect_same_weights(weights, ref_weights);
  EXPECT_EQ(glass::train::load_checkpoint(dir).state.step, kSteps);
  EXPECT_FALSE(has_temp_file(dir)) << "temp files of killed writers were left behind";
}

TEST(CrashConsistency, DiskFullLeavesLatestOnThePreviousCheckpoint) {
  const std::string dir = scratch_path("full_ckpt");
  fs::remove_all(dir);
  const std::string log = scratch_path("full.log");
  // 1. Two steps with room to spare: ckpt_00000002 is the good checkpoint.
  ASSERT_EQ(
      wait_status(spawn_sample("train_gpt", tiny_args(2, dir, scratch_path("w.safetensors")), log)),
      0)
      << file_bytes(log);
  const std::string good = glass::train::latest_checkpoint_name(dir);
  ASSERT_EQ(good, "ckpt_00000002.safetensors");
  const auto size = fs::file_size(dir + "/" + good);
  // 2. Resume with files limited to 8 KiB (ulimit -f counts 512-byte blocks in POSIX sh), less than
  //    a checkpoint: the step-3 write fails part way, as on a full disk.
  ASSERT_GT(size, 16u << 10);
  std::string cmd = "ulimit -f 16 && exec " + std::string(GLASS_BINARY_DIR) + "/samples/train_gpt";
  for (const std::string& a : tiny_args(4, dir, scratch_path("w2.safetensors"))) cmd += " " + a;
  cmd += " --resume " + dir;
  const glass::testing::Outcome r = glass::testing::run_command(cmd);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("train_gpt: error: checkpoint at step 3 was not written"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("File too large"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'latest' still names ckpt_00000002.safetensors"), std::string::npos)
      << r.out;
  // 3. `latest` still names the good checkpoint, it loads, and no partial file is left.
  EXPECT_EQ(glass::train::latest_checkpoint_name(dir), good);
  EXPECT_EQ(glass::train::load_checkpoint(dir).state.step, 2);
  EXPECT_FALSE(has_temp_file(dir));
  EXPECT_FALSE(fs::exists(dir + "/ckpt_00000003.safetensors"));
}

// Starts a long run, waits for `steps_seen` progress lines, sends `sig`; returns (status, log).
std::pair<int, std::string> interrupt(int sig, const std::string& dir, const std::string& name) {
  const std::string log = scratch_path(name + ".log");
  fs::remove(log);
  std::vector<std::string> args = tiny_args(100000, dir, scratch_path(name + ".safetensors"));
  args.erase(std::find(args.begin(), args.end(), "--quiet"));  // progress lines, to wait for
  if (dir.empty()) {
    auto it = std::find(args.begin(), args.end(), "--checkpoint-dir");
    args.erase(it, it + 4);  // --checkpoint-dir DIR --checkpoint-every 1
  } else {
    *(std::find(args.begin(), args.end(), "--checkpoint-every") + 1) = "1000";
  }
  const pid_t pid = spawn_sample("train_gpt", args, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (file_bytes(log).find("step     3/") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  kill(pid, sig);
  const int status = wait_status(pid);
  return {status, file_bytes(log)};
}

TEST(CleanShutdown, SigintFinishesTheStepWritesACheckpointAndExits130) {
  const std::string dir = scratch_path("sigint_ckpt");
  fs::remove_all(dir);
  const auto [status, out] = interrupt(SIGINT, dir, "sigint");
  EXPECT_EQ(status, 130) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex("stopped by SIGINT after step (\\d+): checkpoint written to (\\S+) ")))
      << out;
  const int64_t step = std::stoll(m[1]);
  EXPECT_GE(step, 3);
  EXPECT_EQ(m[2].str(), dir + "/" + glass::train::latest_checkpoint_name(dir));
  EXPECT_EQ(glass::train::load_checkpoint(dir).state.step, step);
  // The step it announced is the last one it printed: it stopped between steps.
  EXPECT_NE(out.find(fmt::format("step {:5d}/", step)), std::string::npos) << out;
  EXPECT_EQ(out.find(fmt::format("step {:5d}/", step + 1)), std::string::npos) << out;
}

TEST(CleanShutdown, SigtermWithoutCheckpointDirExits143AndSaysNothingWasSaved) {
  const auto [status, out] = interrupt(SIGTERM, "", "sigterm");
  EXPECT_EQ(status, 143) << out;
  EXPECT_NE(out.find("stopped by SIGTERM after step"), std::string::npos) << out;
  EXPECT_NE(out.find("no --checkpoint-dir, so nothing was saved"), std::string::npos) << out;
}

}  // namespace
