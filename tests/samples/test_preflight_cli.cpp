// train_gpt's memory pre-flight (train/preflight.h) and out-of-memory errors as a user meets them,
// on the cuda device of the emulated CUDA runtime with its memory limited by GLASS_EMU_GPU_MEMORY
// (engine/emu/gpu_memory.h): a step that does not fit is refused before anything is written,
// naming remedies whose own plans fit; one over 80% of the memory is warned about; with
// --no-preflight the same step fails at the allocation that does not fit, naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "autograd/ops.h"
#include "cli_testing.h"
#include "engine/allocator.h"
#include "engine/device_memory.h"
#include "kernels/cuda/cuda_kernels.h"
#include "train/data.h"
#include "train/step_plan.h"

namespace glass {
namespace {

using testing::contains_all;
using testing::Outcome;

const std::string& kData = testing::kTinyShakespeare;

#if defined(GLASS_HAS_CUDA) && defined(GLASS_CUDA_RUNTIME_EMU)

// train_gpt with GLASS_EMU_GPU_MEMORY=`memory` on the cuda device of the emulated runtime.
Outcome train_on_emulated_gpu(const std::string& memory, const std::string& args) {
  return testing::run_command("GLASS_EMU_GPU_MEMORY='" + memory + "' " + GLASS_BINARY_DIR +
                              "/samples/train_gpt --device cuda --data " + kData +
                              " --sample 0 --eval-every 0 --eval-batches 1 --threads 1 " + args);
}

// The peak one step of this shape plans to on meta, as train_gpt's pre-flight plans it on cuda:
// the step, and the GEMM workspace that cuda makes once per process (kernels/cuda/gemm.cu; made on
// meta beforehand, so that it is left out of the plan whatever this process planned before, and
// added once).
int64_t planned_peak(int64_t layers, int64_t heads, int64_t width, int64_t seq_len, int64_t batch,
                     DType dtype, int64_t grad_accum = 1, bool cuda_graph = false) {
  train::StepPlanOptions o;
  o.config = GPTConfig{.vocab_size = train::load_dataset(kData, 0).vocab_size,
                       .block_size = seq_len,
                       .n_layer = layers,
                       .n_head = heads,
                       .n_embd = width};
  o.batch = batch;
  o.seq_len = seq_len;
  o.grad_accum = grad_accum;
  o.dtype = dtype;
  o.cuda_graph = cuda_graph;
  matmul(Tensor::empty({8, 8}, DType::f32, kMeta), Tensor::empty({8, 8}, DType::f32, kMeta));
  return train::record_training_step(kMeta, o).peak_in_use_bytes +
         kernels::cuda::kGemmWorkspaceBytes;
}

// A step of ~2 GiB on a 1 GiB GPU: one error line before anything is written, with the figures,
// and remedies each with its planned peak; those said to fit do fit when planned here.
TEST(Preflight, RefusesAStepThatDoesNotFitAndNamesRemediesThatFit) {
  if (!testing::have_cuda()) GTEST_SKIP() << "no emulated GPU";
  const std::string dir = testing::scratch_path("preflight_refusal");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/checkpoints");
  const std::string metrics = dir + "/m.jsonl", weights = dir + "/w.safetensors";
  const std::string shape = "--n-layer 2 --n-head 4 --n-embd 256 --seq-len 256 ";
  const Outcome r =
      train_on_emulated_gpu("1GiB", shape + "--batch 128 --dtype f32 --steps 2 --metrics " +
                                        metrics + " --checkpoint-dir " + dir +
                                        "/checkpoints --checkpoint-every 1 --save " + weights);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("train_gpt: error: pre-flight: one training step needs ", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;  // one line
  EXPECT_TRUE(contains_all(
      r.out, {"allocated, planned on the meta device", "has 1.00 GiB free of 1.00 GiB",
              "cudaMemGetInfo", "128 rows x 256 tokens", "Each of these would fit: --batch ",
              "--grad-accum", "--dtype bf16 (planned peak", "--no-preflight"}))
      << r.out;
  // Nothing written: no metrics, no checkpoint, no weights.
  EXPECT_FALSE(std::filesystem::exists(metrics));
  EXPECT_FALSE(std::filesystem::exists(weights));
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/checkpoints"));
  // Every remedy said to fit has a plan here that fits in 1 GiB; --batch and --grad-accum are
  // both among them.
  const std::string fitting = r.out.substr(r.out.find("Each of these would fit"));
  const std::string fit_list = fitting.substr(0, fitting.find(". "));
  const std::regex remedy(R"(--batch (\d+)(?: --grad-accum (\d+))? \(planned peak)");
  int batch_only = 0, accumulated = 0;
  for (std::sregex_iterator it(fit_list.begin(), fit_list.end(), remedy), end; it != end; ++it) {
    const int64_t batch = std::stoll((*it)[1]);
    const int64_t k = (*it)[2].matched ? std::stoll((*it)[2]) : 1;
    EXPECT_EQ(k == 1 ? batch : batch * k, k == 1 ? batch : 128) << "the global batch is kept";
    EXPECT_LE(planned_peak(2, 4, 256, 256, batch, DType::f32, k), int64_t{1} << 30) << it->str();
    (k == 1 ? batch_only : accumulated)++;
  }
  EXPECT_EQ(batch_only, 1) << fit_list;
  EXPECT_EQ(accumulated, 1) << fit_list;
}

// A step planned at 90% of the GPU's memory: a warning, then it trains; the metrics hold the
// planned peak beside the measured one, and the two agree (meta plans what cuda allocates).
TEST(Preflight, WarnsOver80PercentAndRecordsPlannedAndMeasuredPeaks) {
  if (!testing::have_cuda()) GTEST_SKIP() << "no emulated GPU";
  const int64_t peak = planned_peak(1, 2, 16, 8, 2, DType::bf16);
  const std::string metrics = testing::scratch_path("preflight_warning.jsonl");
  std::filesystem::remove(metrics);
  const Outcome r = train_on_emulated_gpu(
      std::to_string(peak * 10 / 9),
      "--n-layer 1 --n-head 2 --n-embd 16 --seq-len 8 --batch 2 --steps 2 --metrics " + metrics);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains_all(
      r.out, {"pre-flight: the step's planned peak is", "(90%)", "over 80% of the free memory"}))
      << r.out;
  EXPECT_TRUE(contains_all(r.out, {"planned peak ", "(pre-flight), measured ", "(step 2)"}))
      << r.out;
  std::ifstream in(metrics);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  const nlohmann::json j = nlohmann::json::parse(last);
  EXPECT_EQ(j["planned_peak_bytes"].get<int64_t>(), peak);
  const auto measured = static_cast<double>(j["peak_allocated_bytes"].get<int64_t>());
  EXPECT_NEAR(measured, static_cast<double>(peak), 0.03 * static_cast<double>(peak));
}

// --no-preflight on a GPU too small for the step: the allocation that does not fit fails, and
// its error names the tensor's shape and dtype, the op and module that asked, the allocator's and
// the device's figures, and the remedies.
TEST(Preflight, NoPreflightMeetsAnOutOfMemoryThatNamesTensorOpAndModule) {
  if (!testing::have_cuda()) GTEST_SKIP() << "no emulated GPU";
  const std::string shape = "--n-layer 2 --n-head 4 --n-embd 128 --seq-len 128 --batch 32 ";
  const int64_t peak = planned_peak(2, 4, 128, 128, 32, DType::bf16);
  const int64_t workspace = kernels::cuda::kGemmWorkspaceBytes;
  const std::string memory = std::to_string(workspace + (peak - workspace) / 2);
  const Outcome refused = train_on_emulated_gpu(memory, shape + "--steps 1");
  EXPECT_NE(refused.out.find("pre-flight: one training step needs"), std::string::npos)
      << refused.out;
  const Outcome r = train_on_emulated_gpu(memory, shape + "--steps 1 --no-preflight");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("pre-flight"), std::string::npos) << r.out;
  const std::regex named(
      R"(train_gpt: error: out of memory on cuda:0 allocating [\d.]+ [KMG]iB for a tensor \[\d+(, \d+)*\] (bf16|f32) in op '\w+' \((forward|backward)\) of module '[\w.]+': the allocator holds [\d.]+ [KMG]iB allocated and [\d.]+ [KMG]iB reserved; its largest free block was )");
  EXPECT_TRUE(std::regex_search(r.out, named)) << r.out;
  EXPECT_TRUE(contains_all(r.out, {"free of", "cudaMemGetInfo", "--batch", "--grad-accum",
                                   "--recompute", "--zero 1", "--no-preflight"}))
      << r.out;
}

// --cuda-graph: the graph's private pool is planned (its free blocks are the graph's while it
// lives). A GPU between the eager step's plan and the graph's: the graph run is refused, naming
// the pool; the same run without the graph fits and trains. With room for the pool the graph run
// trains, and its metrics hold the plan and the measured peak in use (the pool whole) within 3%.
TEST(Preflight, PlansTheCudaGraphsPoolAndRefusesWhatDoesNotFitWithIt) {
  if (!testing::have_cuda()) GTEST_SKIP() << "no emulated GPU";
  const std::string shape = "--n-layer 2 --n-head 2 --n-embd 64 --seq-len 32 --batch 4 ";
  const int64_t eager = planned_peak(2, 2, 64, 32, 4, DType::bf16);
  const int64_t graph = planned_peak(2, 2, 64, 32, 4, DType::bf16, 1, true);
  ASSERT_GT(graph, eager);
  const std::string memory = std::to_string((eager + graph) / 2);
  const Outcome refused = train_on_emulated_gpu(memory, shape + "--steps 2 --cuda-graph");
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_TRUE(contains_all(refused.out, {"pre-flight: one training step needs",
                                         "with the CUDA graph's private pool of"}))
      << refused.out;
  const Outcome fits = train_on_emulated_gpu(memory, shape + "--steps 2");
  EXPECT_EQ(fits.status, 0) << fits.out;
  const std::string metrics = testing::scratch_path("preflight_graph.jsonl");
  std::filesystem::remove(metrics);
  const Outcome replayed = train_on_emulated_gpu(
      std::to_string(graph * 2), shape + "--steps 2 --cuda-graph --metrics " + metrics);
  ASSERT_EQ(replayed.status, 0) << replayed.out;
  EXPECT_NE(replayed.out.find("with the CUDA graph's private pool of"), std::string::npos)
      << replayed.out;
  std::ifstream in(metrics);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  const nlohmann::json j = nlohmann::json::parse(last);
  EXPECT_EQ(j["planned_peak_bytes"].get<int64_t>(), graph);
  const auto in_use = static_cast<double>(j["peak_in_use_bytes"].get<int64_t>());
  EXPECT_NEAR(in_use, static_cast<double>(graph), 0.03 * static_cast<double>(graph));
}

// A value of GLASS_EMU_GPU_MEMORY that is not a size: one error naming the variable.
TEST(Preflight, BadEmulatedGpuMemoryIsOneErrorNamingTheVariable) {
  if (!testing::have_cuda()) GTEST_SKIP() << "no emulated GPU";
  const Outcome r = train_on_emulated_gpu("12 potatoes", "--steps 1");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("train_gpt: error: GLASS_EMU_GPU_MEMORY='12 potatoes': expected a size", 0),
            0u)
      << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
}

#endif

// On cpu the pre-flight compares with the host's available memory: a small run fits, says so,
// and its metrics carry the planned peak, which the step's measured peak meets within 3% (the
// run's own allocations only: the MFU line's bandwidth probe at start leaves no peak behind);
// --no-preflight leaves it out (-1).
TEST(Preflight, CpuRunRecordsThePlannedPeakAndNoPreflightSkipsIt) {
  const std::string metrics = testing::scratch_path("preflight_cpu.jsonl");
  for (const bool skip : {false, true}) {
    std::filesystem::remove(metrics);
    // n_embd 32, H 2: a head dim of 16, whose attention meta plans with the flash kernel that
    // cpu runs (below 16 meta plans the naive one). The plan rounds as cpu's allocator does (its
    // 64-byte classes for small tensors: tests/train/test_memory_ledger.cpp).
    const Outcome r = testing::run_sample(
        "train_gpt", "--data " + kData +
                         " --n-layer 1 --n-head 2 --n-embd 32 --seq-len 32 --batch 4 --sample 0 "
                         "--eval-every 0 --eval-batches 1 --threads 1 --steps 2 --metrics " +
                         metrics + (skip ? " --no-preflight" : ""));
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(r.out.find("pre-flight:") == std::string::npos, skip) << r.out;
    std::ifstream in(metrics);
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    const int64_t planned = nlohmann::json::parse(line)["planned_peak_bytes"].get<int64_t>();
    if (skip) {
      EXPECT_EQ(planned, -1);
      continue;
    }
    EXPECT_GT(planned, 0);
    ASSERT_TRUE(std::getline(in, line));  // step 2
    const auto measured = nlohmann::json::parse(line)["peak_allocated_bytes"].get<double>();
    EXPECT_NEAR(measured, static_cast<double>(planned), 0.03 * static_cast<double>(planned));
  }
}

}  // namespace
}  // namespace glass
