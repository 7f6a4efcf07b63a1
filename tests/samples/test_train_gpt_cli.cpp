// train_gpt as a user runs it: bad input gives one clear error line and a non-zero exit; a tiny
// run trains, saves weights, writes metrics and can start again from the saved weights.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

#include "cli_testing.h"

namespace {

using glass::testing::Outcome;

Outcome run_train_gpt(const std::string& args) {
  return glass::testing::run_sample("train_gpt", args);
}

std::string tmp(const std::string& name) { return glass::testing::scratch_path(name); }

const std::string& kData = glass::testing::kTinyShakespeare;
const std::string kTiny = "--data " + kData + " " + glass::testing::kTinyRunFlags;
// The data alone: for the flags kTiny sets, whose errors come before the model's shape matters.
const std::string kData1 = "--data " + kData + " ";

void expect_one_line_error(const std::string& args, const std::string& fragment) {
  glass::testing::expect_one_line_error("train_gpt", args, fragment);
}

TEST(TrainGptCli, UnknownFlag) { expect_one_line_error("--no-such-flag 3", "--no-such-flag"); }

// A flag spelled with '_' or a typo gets the flag it was probably meant to be; a flag like no
// other gets no guess.
TEST(TrainGptCli, MistypedFlagGetsDidYouMean) {
  expect_one_line_error("--n_layer 2", "did you mean --n-layer?");
  expect_one_line_error("--n-layr 2", "did you mean --n-layer?");
  const auto r = glass::testing::run_sample("train_gpt", "--zzzzzzzz 2");
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << r.out;
}

TEST(TrainGptCli, MissingDataFile) {
  expect_one_line_error("--data /nonexistent/shakespeare.txt --steps 1",
                        "/nonexistent/shakespeare.txt");
}

TEST(TrainGptCli, DeviceCudaWithoutGpu) {
#if defined(GLASS_CUDA_RUNTIME_EMU)
  // The emulated runtime's machine without a GPU: train_gpt runs with GLASS_EMU_GPUS=0.
  ::setenv("GLASS_EMU_GPUS", "0", 1);
  expect_one_line_error(kTiny + "--steps 1 --device cuda",
                        "device cuda:0: no CUDA GPU found (cudaGetDeviceCount: ");
  ::unsetenv("GLASS_EMU_GPUS");
#elif defined(GLASS_HAS_CUDA)
  if (glass::cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present";
  expect_one_line_error(kTiny + "--steps 1 --device cuda",
                        "device cuda:0: no CUDA GPU found (cudaGetDeviceCount: ");
#else
  expect_one_line_error(kTiny + "--steps 1 --device cuda", "has no CUDA runtime");
#endif
}

TEST(TrainGptCli, CudnnAttentionIsRefusedOffCuda) {
  expect_one_line_error(kTiny + "--steps 1 --device emu --attention cudnn",
                        "cudnn attention runs on cuda only (not on emu)");
  expect_one_line_error(kTiny + "--steps 1 --device cpu --attention cudnn",
                        "cudnn attention runs on cuda only (not on cpu)");
  expect_one_line_error(kTiny + "--steps 1 --attention fast", "--attention");
}

TEST(TrainGptCli, FlashAttentionNeedsASupportedHeadDim) {
  // kTiny's width and heads give head dim 8: refused before training starts, naming the rule of
  // the kernel `flash` resolves to there (the CUDA-core one: emu's Tensor Core kernel takes bf16
  // with head dims 32, 64, 128)
  expect_one_line_error(kTiny + "--steps 1 --device emu --attention flash",
                        "flash-simt attention takes head dims that are multiples of 8 in 16..128, "
                        "not 8");
  expect_one_line_error(kTiny + "--steps 1 --device emu --dtype bf16 --attention flash-mma",
                        "flash-mma attention takes head dims 32, 64 and 128, not 8");
  expect_one_line_error(kTiny + "--steps 1 --device emu --dtype f32 --attention flash-mma",
                        "flash-mma attention runs in bf16 only, not f32");
  expect_one_line_error(kTiny + "--steps 1 --device cpu --attention flash-simt",
                        "flash-simt attention runs on emu and cuda only");
}

TEST(TrainGptCli, ShapeMismatchHeadsDoNotDivideWidth) {
  expect_one_line_error("--data " + kData + " --n-embd 30 --n-head 4 --steps 1", "n_head");
}

// Llama's shape errors: each one line naming both numbers (or the flag and the architecture).
TEST(TrainGptCli, LlamaShapeErrors) {
  expect_one_line_error(kData1 + "--arch llama --n-head 4 --n-kv-head 3 --steps 1",
                        "n_kv_head 3 must divide n_head 4");
  expect_one_line_error(kData1 + "--arch llama --n-embd 12 --n-head 4 --steps 1",
                        "RoPE needs an even head dim");
  expect_one_line_error(kData1 + "--n-kv-head 2 --steps 1", "--n-kv-head is a llama flag");
  expect_one_line_error(kData1 + "--model llama-tiny --n-kv-head 2 --steps 1",
                        "--model llama-tiny fixes the model's shape; drop --n-kv-head");
  expect_one_line_error(kData1 + "--arch llama --dropout 0.1 --steps 1", "dropout 0.1 is gpt2's");
}

TEST(TrainGptCli, CorruptShard) {
  const std::string path = tmp("corrupt.bin");
  std::ofstream(path, std::ios::binary) << std::string("\x88\xd8\x34\x01", 4) << "junk";
  expect_one_line_error("--data " + path + " --vocab-size 50 --steps 1", "corrupt.bin");
}

TEST(TrainGptCli, CorruptCheckpoint) {
  const std::string dir = tmp("ckdir");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/latest") << "ckpt_00000001.safetensors\n";
  std::ofstream(dir + "/ckpt_00000001.safetensors") << "garbage";
  expect_one_line_error(kTiny + "--steps 2 --resume " + dir, "ckpt_00000001.safetensors");
}

TEST(TrainGptCli, WrongDtypeInitWeights) {
  // Token ids (i32) where weights should be: a dtype error naming the parameter.
  const std::string path = tmp("ints.safetensors");
  const std::string header =
      R"({"transformer.wte.weight":{"dtype":"I32","shape":[65,16],"data_offsets":[0,4160]}})";
  std::string bytes(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += header + std::string(4160, '\0');
  std::ofstream(path, std::ios::binary) << bytes;
  const Outcome r = run_train_gpt(kTiny + "--steps 1 --init " + path);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("train_gpt: error:"), std::string::npos) << r.out;
}

TEST(TrainGptCli, TinyRunSavesWeightsMetricsAndRestartsFromThem) {
  const std::string weights = tmp("w.safetensors"), metrics = tmp("m.jsonl");
  std::filesystem::remove(metrics);
  const Outcome r = run_train_gpt(kTiny + "--steps 3 --save " + weights + " --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("step     3/3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done: 3 steps"), std::string::npos) << r.out;
  std::ifstream in(metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const char* key : {"step", "loss", "lr", "ms", "tokens_per_s"})
      EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["step"], ++lines);
  }
  EXPECT_EQ(lines, 3);
  const Outcome again = run_train_gpt(kTiny + "--steps 1 --init " + weights);
  EXPECT_EQ(again.status, 0) << again.out;
}

// The end line's MFU (and HFU under --recompute) is the run's tokens/s times the model's FLOPs
// per token over the peak; the metrics give FLOPs per token / peak independently, as each step's
// mfu / tokens_per_s (one rank), and hfu / tokens_per_s with the recomputed forward counted.
void expect_summary_utilisation(const std::string& flags, bool hfu) {
  const std::string metrics = tmp("utilisation.jsonl");
  std::filesystem::remove(metrics);
  const Outcome r = run_train_gpt(kTiny + "--steps 2 --metrics " + metrics + " " + flags);
  ASSERT_EQ(r.status, 0) << r.out;
  std::smatch m;
  const std::regex done(hfu ? R"(done: .* \| (\d+) tok/s \| MFU ([0-9.]+)% HFU ([0-9.]+)% \|)"
                            : R"(done: .* \| (\d+) tok/s \| MFU ([0-9.]+)% \|)");
  ASSERT_TRUE(std::regex_search(r.out, m, done)) << r.out;
  std::ifstream in(metrics);
  std::string line;
  std::getline(in, line);
  const auto j = nlohmann::json::parse(line);
  const double tokens_per_s = std::stod(m[1].str());
  const double mfu_per_token_per_s = j["mfu"].get<double>() / j["tokens_per_s"].get<double>();
  EXPECT_NEAR(std::stod(m[2].str()), 100 * mfu_per_token_per_s * tokens_per_s,
              0.01 + 100 * mfu_per_token_per_s)  // the printed rounding of % and tok/s
      << r.out;
  if (hfu) {
    const double hfu_per_token_per_s = j["hfu"].get<double>() / j["tokens_per_s"].get<double>();
    EXPECT_GT(hfu_per_token_per_s, mfu_per_token_per_s);
    EXPECT_NEAR(std::stod(m[3].str()), 100 * hfu_per_token_per_s * tokens_per_s,
                0.01 + 100 * hfu_per_token_per_s)
        << r.out;
  }
}

TEST(TrainGptCli, TheEndLineGivesTheRunsMfu) { expect_summary_utilisation("", false); }
TEST(TrainGptCli, TheEndLineGivesHfuBesideMfuUnderRecompute) {
  expect_summary_utilisation("--recompute block", true);
}

// `--device cpu --dtype bf16` (bf16 mixed precision on the cpu kernels): the loss falls over 16
// steps (batch 8 of 32 tokens, constant lr 1e-2: the mean of the last 4 losses below the first
// 4's), and a run stopped at step 8 and resumed from its checkpoint ends with the same losses and
// saved weights, bit for bit, as the run straight through (the bf16 copies are a function of the
// f32 masters, so a checkpoint holds all the state).
TEST(TrainGptCli, CpuBf16TrainsAndResumesBitExactly) {
  const std::string run = kData1 +
                          "--n-layer 1 --n-head 2 --n-embd 32 --seq-len 32 --batch 8 --sample 0 "
                          "--eval-every 0 --eval-batches 1 --threads 1 --device cpu --dtype bf16 "
                          "--lr 1e-2 --lr-schedule constant --warmup 0 --dropout 0.1 ";
  const std::string dir = tmp("cpu_bf16_ck");
  std::filesystem::remove_all(dir);
  std::string weights[2], metrics[2];
  for (int i = 0; i < 2; ++i) {
    weights[i] = tmp("cpu_bf16_" + std::to_string(i) + ".safetensors");
    metrics[i] = tmp("cpu_bf16_" + std::to_string(i) + ".jsonl");
    std::filesystem::remove(metrics[i]);
  }
  const Outcome straight =
      run_train_gpt(run + "--steps 16 --save " + weights[0] + " --metrics " + metrics[0]);
  ASSERT_EQ(straight.status, 0) << straight.out;
  EXPECT_NE(straight.out.find("bf16 mixed precision"), std::string::npos) << straight.out;
  const Outcome first = run_train_gpt(run + "--steps 8 --checkpoint-dir " + dir);
  ASSERT_EQ(first.status, 0) << first.out;
  const Outcome resumed = run_train_gpt(run + "--steps 16 --resume " + dir + " --save " +
                                        weights[1] + " --metrics " + metrics[1]);
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  std::vector<std::string> losses[2];
  std::vector<double> values;
  for (int i = 0; i < 2; ++i) {
    std::ifstream in(metrics[i]);
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      losses[i].push_back(j.at("loss").dump());
      if (i == 0) values.push_back(j.at("loss").get<double>());
    }
  }
  ASSERT_EQ(values.size(), 16u);
  const auto mean4 = [](auto first) { return (first[0] + first[1] + first[2] + first[3]) / 4; };
  EXPECT_LT(mean4(values.end() - 4), mean4(values.begin()));
  // the resumed run's steps 9..16 are the straight run's, every digit
  ASSERT_EQ(losses[1].size(), 8u);
  EXPECT_EQ(losses[1], std::vector<std::string>(losses[0].begin() + 8, losses[0].end()));
  EXPECT_TRUE(glass::testing::file_bytes(weights[1]) == glass::testing::file_bytes(weights[0]))
      << "the resumed run's saved weights differ";
}

// --steps 0 --save writes the weights as initialised: training one step from them gives the same
// first loss as a fresh run with the same seed (the step-1 loss is computed before the update).
TEST(TrainGptCli, ZeroStepsSavesTheInitialWeights) {
  const std::string weights = tmp("w0.safetensors");
  std::filesystem::remove(weights);
  const Outcome zero = run_train_gpt(kTiny + "--steps 0 --seed 11 --save " + weights);
  ASSERT_EQ(zero.status, 0) << zero.out;
  ASSERT_TRUE(std::filesystem::exists(weights)) << zero.out;
  EXPECT_EQ(zero.out.find("--- sample"), std::string::npos) << zero.out;
  const auto first_loss = [](const std::string& out) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(out, m, std::regex(R"(step +1/1 .*?loss ([0-9.]+))"))) << out;
    return m.size() > 1 ? m[1].str() : std::string("?");
  };
  const Outcome fresh = run_train_gpt(kTiny + "--steps 1 --seed 11");
  const Outcome from_file = run_train_gpt(kTiny + "--steps 1 --seed 11 --init " + weights);
  ASSERT_EQ(fresh.status, 0) << fresh.out;
  ASSERT_EQ(from_file.status, 0) << from_file.out;
  EXPECT_EQ(first_loss(fresh.out), first_loss(from_file.out));
  expect_one_line_error(kTiny + "--steps 0", "or 0 with --save FILE");
}

// Start-up checks (H2): a value that would only fail after training fails before step 1, in one
// line naming the flag, and trains nothing.
TEST(TrainGptCli, SamplingOptionsFailBeforeTraining) {
  const std::string run = kData1 + "--steps 20 --sample 5 ";
  expect_one_line_error(run + "--temperature -1", "--temperature -1 must be >= 0");
  expect_one_line_error(run + "--top-k -3", "--top-k -3 must be >= 0");
  expect_one_line_error(run + "--prompt '\xe6\x97\xa5'", "--prompt: character");
  expect_one_line_error(kData1 + "--steps 20 --sample -5", "--sample -5");
}

TEST(TrainGptCli, OutputDirectoriesAreCheckedBeforeTraining) {
  for (const std::string flag : {"--save", "--trace", "--report"})
    expect_one_line_error(kTiny + "--steps 20 " + flag + " /nonexistent/dir/out",
                          flag +
                              " /nonexistent/dir/out: directory '/nonexistent/dir' does not "
                              "exist");
  const std::string dir = tmp("outdir");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  expect_one_line_error(kTiny + "--steps 20 --save " + dir, "is a directory");
  // The probe of a directory that is fine leaves nothing in it: --save's passes, --report's fails.
  expect_one_line_error(
      kTiny + "--steps 20 --save " + dir + "/w.safetensors --report /nonexistent/r",
      "--report /nonexistent/r");
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  if (::geteuid() != 0) {  // root writes anywhere
    std::filesystem::permissions(
        dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    expect_one_line_error(kTiny + "--steps 20 --save " + dir + "/w.safetensors",
                          "--save " + dir + "/w.safetensors: cannot write in directory");
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  }
}

// Values that are never valid name their flag (L2, L3).
TEST(TrainGptCli, BadCountsNameTheirFlag) {
  expect_one_line_error(kData1 + "--steps 0", "--steps 0 must be at least 1");
  expect_one_line_error(kData1 + "--steps -1 --lr-schedule constant", "--steps -1");
  expect_one_line_error(kData1 + "--steps 1 --eval-batches 0", "--eval-batches 0");
  expect_one_line_error(kData1 + "--steps 1 --eval-batches -2", "--eval-batches -2");
  expect_one_line_error(kData1 + "--steps 1 --eval-every -5", "--eval-every -5");
  expect_one_line_error(kData1 + "--steps 1 --seq-len 0", "--seq-len 0 must be at least 1");
  expect_one_line_error(kData1 + "--steps 1 --batch 0", "--batch 0");
  expect_one_line_error(kData1 + "--steps 1 --threads -1", "--threads -1");
  expect_one_line_error(kData1 + "--steps 1 --checkpoint-every 1",
                        "--checkpoint-every 1 needs --checkpoint-dir");
  expect_one_line_error(kTiny + "--steps 1 --device cpu --tf32", "--tf32 needs");
}

// A flag given twice says so (L1), in the words of the flag rather than CLI11's.
TEST(TrainGptCli, AFlagGivenTwiceSaysSo) {
  const Outcome r = run_train_gpt(kTiny + "--steps 1 --data " + kData);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out, "train_gpt: error: --data given twice ('" + kData + "', '" + kData +
                       "'): give it once (see --help)\n");
  expect_one_line_error(kData1 + "--steps 1 --batch 3 --batch 4", "--batch given twice ('3', '4')");
}

// `make train ARGS="--data X"` passes X alone: the Makefile adds no --data of its own.
TEST(TrainGptCli, MakeTrainTakesDataFromArgs) {
  const Outcome r = glass::testing::run_command("make -n -C " + std::string(GLASS_SOURCE_DIR) +
                                                " train ARGS='--data mine.txt'");
  if (r.status == 127) GTEST_SKIP() << "no make";
  ASSERT_EQ(r.status, 0) << r.out;
  const auto line = r.out.rfind("samples/train_gpt ");  // the run, after make's "built:" line
  ASSERT_NE(line, std::string::npos) << r.out;
  const std::string cmd = r.out.substr(line, r.out.find('\n', line) - line);
  EXPECT_EQ(cmd, "samples/train_gpt --data mine.txt") << r.out;
}

// MFU's peak counts every core: the run says how many threads it used against them (L7).
TEST(TrainGptCli, MfuLineNamesThreadsAndCores) {
  const Outcome r = run_train_gpt(kTiny + "--steps 1 --device cpu");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(" cores; this run uses 1 thread\n"), std::string::npos) << r.out;
}

// The kernel ladders are emu's and cuda's: on cpu a valid selection runs, and says it changes
// nothing; without the variable nothing is said.
TEST(TrainGptCli, KernelVariantOnCpuSaysItChangesNothing) {
  const std::string variant = "GLASS_KERNEL_VARIANT=softmax:0 ";
  const std::string program = std::string(GLASS_BINARY_DIR) + "/samples/train_gpt ";
  const Outcome cpu =
      glass::testing::run_command(variant + program + kTiny + "--steps 1 --device cpu");
  ASSERT_EQ(cpu.status, 0) << cpu.out;
  EXPECT_NE(cpu.out.find("cpu runs its own kernels, so it changes nothing here"), std::string::npos)
      << cpu.out;
  const Outcome plain = run_train_gpt(kTiny + "--steps 1 --device cpu");
  EXPECT_EQ(plain.out.find("GLASS_KERNEL_VARIANT"), std::string::npos) << plain.out;
}

// --resume continues the checkpoint's run (H3): flags given that contradict it, --init beside it,
// text of another vocabulary and a --steps it is already past are errors at start-up.
class TrainGptResume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::filesystem::remove_all(dir());
    const Outcome r = run_train_gpt(kTiny + "--steps 2 --checkpoint-dir " + dir());
    ASSERT_EQ(r.status, 0) << r.out;
  }
  static std::string dir() { return tmp("resume_ck"); }
  static std::string ckpt() { return dir() + "/ckpt_00000002.safetensors"; }
};

TEST_F(TrainGptResume, ShapeFlagsGivenMustAgreeWithTheCheckpoint) {
  // The checkpoint: n_layer 1, n_head 2, n_embd 16, seq_len 8, dropout 0 (kTiny).
  const std::string resume =
      kData1 + "--batch 2 --sample 0 --threads 1 --steps 3 --resume " + dir() + " ";
  const Outcome r = run_train_gpt(resume + "--n-embd 32");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out,
            "train_gpt: error: --resume " + ckpt() +
                " holds a model with vocab_size=65 block_size=8 n_layer=1 n_head=2 n_embd=16 "
                "dropout=0, but --n-embd is 32 (checkpoint: 16)\n");
  expect_one_line_error(resume + "--n-head 4", "--n-head is 4 (checkpoint: 2)");
  expect_one_line_error(resume + "--n-layer 2", "--n-layer is 2 (checkpoint: 1)");
  expect_one_line_error(resume + "--seq-len 4", "--seq-len is 4 (checkpoint: 8)");
  expect_one_line_error(resume + "--dropout 0.1", "--dropout is 0.1 (checkpoint: 0)");
  expect_one_line_error(resume + "--vocab-size 100", "--vocab-size is 100 (checkpoint: 65)");
  // Given and equal to the checkpoint's: fine.
  const Outcome same = run_train_gpt(resume + "--n-head 2 --n-embd 16 --seq-len 8 --dropout 0");
  EXPECT_EQ(same.status, 0) << same.out;
}

TEST_F(TrainGptResume, FlagsLeftAtTheirDefaultsYieldToTheCheckpoint) {
  // No --n-layer/--n-head/--n-embd/--seq-len: their defaults (4, 4, 256, 128) do not count.
  const Outcome r = run_train_gpt("--data " + kData +
                                  " --batch 2 --sample 0 --eval-every 0 --eval-batches 1 "
                                  "--threads 1 --steps 3 --resume " +
                                  ckpt());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("step     3/3"), std::string::npos) << r.out;
}

TEST_F(TrainGptResume, InitAndResumeTogetherIsAnError) {
  expect_one_line_error(kTiny + "--steps 3 --resume " + dir() + " --init " + ckpt(),
                        "--init " + ckpt() + " and --resume " + dir() + ": give one");
}

TEST_F(TrainGptResume, DataOfAnotherVocabularyIsAnError) {
  const std::string other = tmp("other.txt");
  std::ofstream(other) << "abcdefghijklmnop abcdefghijklmnop abcdefghijklmnop abcdefghijklmnop\n";
  expect_one_line_error(
      glass::testing::kTinyRunFlags + "--steps 3 --resume " + dir() + " --data " + other,
      "--resume " + ckpt() + " was trained on " + kData +
          " (a character vocabulary of 65), but --data " + other +
          " has another one (of 18 characters)");
  // Another file with the same characters is the same data as far as the model can tell.
  const std::string copy = tmp("copy.txt");
  std::filesystem::copy_file(kData, copy, std::filesystem::copy_options::overwrite_existing);
  const Outcome r = run_train_gpt(glass::testing::kTinyRunFlags + "--steps 3 --resume " + ckpt() +
                                  " --data " + copy);
  EXPECT_EQ(r.status, 0) << r.out;
}

TEST_F(TrainGptResume, StepsAtOrBelowTheCheckpoint) {
  expect_one_line_error(kTiny + "--steps 1 --resume " + dir(),
                        "--steps 1: --resume " + ckpt() + " is already at step 2");
  // At --steps: the same command run again after a crash at the very end finishes with nothing
  // to train, and no "final loss nan".
  const Outcome r = run_train_gpt(kTiny + "--steps 2 --resume " + ckpt());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("nothing to train: --resume " + ckpt() + " is already at step 2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("done: 0 steps"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
}

#if defined(GLASS_HAS_CUDA)
// --cuda-graph from a fresh process (nothing cached by earlier runs): the capture takes its memory
// from the graph's own pool, and the losses and final weights equal the run without the graph bit
// for bit (the metrics' losses as printed with every digit, the saved weights byte for byte). With
// dropout and two micro-steps per step: the graph holds both, and draws each step's masks. The
// third run captures under GLASS_CUDA_SYNC=1, which waits after every eager launch but must not
// synchronise the stream being captured (that would invalidate the capture).
TEST(TrainGptCli, CudaGraphFromAFreshProcessEqualsTheEagerRun) {
  if (glass::cuda::device_count() == 0)
    GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  std::vector<std::string> losses[3];
  std::string weights[3];
  for (int run = 0; run < 3; ++run) {
    const bool graph = run > 0, sync = run == 2;
    const std::string w = tmp("graph" + std::to_string(run) + ".safetensors");
    const std::string m = tmp("graph" + std::to_string(run) + ".jsonl");
    std::filesystem::remove(m);
    const Outcome r = glass::testing::run_command(
        std::string(sync ? "env GLASS_CUDA_SYNC=1 " : "") + GLASS_BINARY_DIR +
        "/samples/train_gpt " + kTiny +
        "--device cuda --dtype f32 --dropout 0.1 --grad-accum 2 --steps 4 " +
        (graph ? "--cuda-graph " : "") + "--save " + w + " --metrics " + m);
    ASSERT_EQ(r.status, 0) << r.out;
    std::ifstream in(m);
    for (std::string line; std::getline(in, line);)
      losses[run].push_back(nlohmann::json::parse(line).at("loss").dump());
    weights[run] = glass::testing::file_bytes(w);
  }
  EXPECT_EQ(losses[0].size(), 4u);
  EXPECT_FALSE(weights[0].empty());
  for (int run = 1; run < 3; ++run) {
    EXPECT_EQ(losses[run], losses[0]) << "run " << run;
    EXPECT_TRUE(weights[run] == weights[0]) << "the saved weights of run " << run << " differ";
  }
}
#endif

}  // namespace
