// train_gpt --recompute gelu|mlp|block: training with recomputed activations gives the same bits
// as --recompute none (same device, same dtype): the weights after two AdamW steps and every loss
// on the way, for GPT-2 with dropout (the masks replayed from the original Philox offsets) and for
// Llama, on cpu, emu and cuda (the emulated CUDA runtime where no GPU exists), f32 and bf16, with
// --grad-accum and with --cuda-graph. Each run must also have recomputed something (launches
// marked Phase::recompute), so that a mode that silently kept everything cannot pass.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

#include "engine/allocator.h"
#include "engine/launch.h"
#include "nn/recompute.h"
#include "tests/testing.h"
#include "train/gpt_cost.h"
#include "train/step_plan.h"
#include "train_testing.h"

namespace glass::train {
namespace {

using testing::have_cuda;

// Counts the launches of each phase, and the kernels of the recomputed ones.
struct PhaseCounter : LaunchObserver {
  int recompute = 0, backward = 0;
  std::set<std::string> recomputed_kernels;
  void on_launch_end(const LaunchRecord& r) override {
    if (r.info.phase == Phase::recompute) {
      ++recompute;
      recomputed_kernels.insert(r.info.kernel);
    }
    backward += r.info.phase == Phase::backward;
  }
};

struct TrainedRun {
  std::vector<std::vector<float>> weights;
  std::vector<double> losses;
  int recompute_launches = 0;
};

TrainedRun train(TrainOptions o) {
  o.steps = 2;
  Trainer t(o);
  PhaseCounter counter;
  subscribe(&counter);
  TrainedRun run;
  while (t.step() < o.steps) run.losses.push_back(t.train_step().loss);
  unsubscribe(&counter);
  run.weights = testing::weights_of(t);
  run.recompute_launches = counter.recompute;
  return run;
}

// Every mode against none on one configuration.
void expect_modes_bit_identical(const TrainOptions& base, const std::string& what) {
  const TrainedRun none = train(base);
  EXPECT_EQ(none.recompute_launches, 0) << what;
  for (const char* mode : {"gelu", "mlp", "block"}) {
    TrainOptions o = base;
    o.recompute = mode;
    const TrainedRun r = train(o);
    EXPECT_GT(r.recompute_launches, 0) << what << " --recompute " << mode << " recomputed nothing";
    EXPECT_EQ(r.losses, none.losses) << what << " --recompute " << mode;
    EXPECT_TRUE(r.weights == none.weights)
        << what << " --recompute " << mode << ": the weights differ from --recompute none";
  }
}

TrainOptions gpt2(const char* device, const char* dtype) {
  TrainOptions o = testing::tiny_options();  // dropout 0.1: the masks must be replayed
  o.device = device;
  o.dtype = dtype;
  return o;
}

TrainOptions llama(const char* device, const char* dtype) {
  TrainOptions o = gpt2(device, dtype);
  o.arch = "llama";
  o.n_head = 4;
  o.n_kv_head = 2;
  o.ffn_hidden = 24;
  o.dropout = 0;  // a llama has none
  return o;
}

TEST(Recompute, Gpt2CpuIsBitIdenticalToNone) {
  expect_modes_bit_identical(gpt2("cpu", "f32"), "gpt2 cpu f32 dropout 0.1");
  // bf16: the GELU of forward's GEMM epilogue reads the unrounded f32 sum, so gelu's rebuild is
  // that GEMM again (a GELU kernel on the stored bf16 pre rounded twice: the losses differed from
  // step 2)
  expect_modes_bit_identical(gpt2("cpu", "bf16"), "gpt2 cpu bf16 dropout 0.1");
  // C = 15: the GELU's input rows are padded (4C = 60 to 64), which gelu's rebuild reads past.
  TrainOptions odd = gpt2("cpu", "f32");
  odd.n_embd = 15;
  odd.n_head = 3;
  expect_modes_bit_identical(odd, "gpt2 cpu f32 C=15");
}

TEST(Recompute, Gpt2EmuIsBitIdenticalToNone) {
  expect_modes_bit_identical(gpt2("emu", "f32"), "gpt2 emu f32 dropout 0.1");
  expect_modes_bit_identical(gpt2("emu", "bf16"), "gpt2 emu bf16 dropout 0.1");
  TrainOptions odd = gpt2("emu", "f32");
  odd.n_embd = 15;
  odd.n_head = 3;
  expect_modes_bit_identical(odd, "gpt2 emu f32 C=15");
}

TEST(Recompute, Gpt2CudaIsBitIdenticalToNone) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  expect_modes_bit_identical(gpt2("cuda", "f32"), "gpt2 cuda f32 dropout 0.1");
  expect_modes_bit_identical(gpt2("cuda", "bf16"), "gpt2 cuda bf16 dropout 0.1");
}

TEST(Recompute, LlamaIsBitIdenticalToNone) {
  expect_modes_bit_identical(llama("cpu", "f32"), "llama cpu f32");
  expect_modes_bit_identical(llama("emu", "bf16"), "llama emu bf16");
  if (have_cuda()) expect_modes_bit_identical(llama("cuda", "bf16"), "llama cuda bf16");
}

TEST(Recompute, GradAccumIsBitIdenticalToNone) {
  TrainOptions o = gpt2("cpu", "f32");
  o.grad_accum = 2;
  expect_modes_bit_identical(o, "gpt2 cpu f32 --grad-accum 2");
}

TEST(Recompute, CudaGraphIsBitIdenticalToNone) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  // Captured once after an eager warm-up step, then replayed: the recomputation and its dropout
  // masks (Philox offsets read from device memory) are inside the graph.
  TrainOptions o = gpt2("cuda", "bf16");
  o.cuda_graph = true;
  const TrainedRun none = train(o);
  for (const char* mode : {"gelu", "mlp", "block"}) {
    TrainOptions m = o;
    m.recompute = mode;
    const TrainedRun r = train(m);
    EXPECT_EQ(r.losses, none.losses) << "--cuda-graph --recompute " << mode;
    EXPECT_TRUE(r.weights == none.weights) << "--cuda-graph --recompute " << mode;
  }
}

// A traced step marks the recomputed forward: with block, the blocks' forward kernels run again
// in backward as Phase::recompute (a GEMM, the attention, LayerNorm); with none there is none.
TEST(Recompute, TracedStepMarksRecomputedLaunches) {
  for (const char* mode : {"none", "block"}) {
    TrainOptions o = gpt2("cpu", "f32");
    o.dropout = 0;  // the fused attention (with dropout, attention runs as plain ops)
    o.recompute = mode;
    Trainer t(o);
    PhaseCounter counter;
    subscribe(&counter);
    t.train_step();
    unsubscribe(&counter);
    if (std::string(mode) == "none") {
      EXPECT_EQ(counter.recompute, 0);
    } else {
      EXPECT_GT(counter.recompute, 10);
      for (const char* kernel : {"residual_layernorm_forward", "gemm", "flash_attention_forward"})
        EXPECT_EQ(counter.recomputed_kernels.count(kernel), 1u)
            << kernel << " is not among the recomputed kernels";
    }
  }
}

// Recomputation is for memory: with block, the step's peak allocated bytes fall below none's.
TEST(Recompute, BlockLowersThePeakAllocation) {
  auto peak_of = [](const char* mode) {
    TrainOptions o = gpt2("cpu", "f32");
    o.n_layer = 4;
    o.dropout = 0;
    o.recompute = mode;
    Trainer t(o);
    t.train_step();
    Allocator& a = Allocator::for_device(kCPU);
    a.reset_peaks();
    t.train_step();
    return a.stats().peak_allocated_bytes;
  };
  const int64_t none = peak_of("none"), block = peak_of("block");
  EXPECT_LT(block, none);
}

// The ledger: the cost model's change of the peak for each mode (saved activations shrink, one
// layer's recomputed part is added) against the allocator's measured change in a real step of the
// default model on cpu, f32 (train_gpt's defaults: L=4 H=4 C=256 T=128 B=16, 65 characters). The
// difference from none and each peak itself are compared, within 3% of the measured peak; the
// figures are printed.
TEST(RecomputeLedger, PredictedPeakFollowsTheMeasuredOneOnCpu) {
  StepPlanOptions o;
  o.config =
      GPTConfig{.vocab_size = 65, .block_size = 128, .n_layer = 4, .n_head = 4, .n_embd = 256};
  o.batch = 16;
  o.seq_len = 128;
  o.dtype = DType::f32;
  const auto predicted = [&](Recompute mode) {
    const GptMemoryBudget b =
        gpt_memory_budget(o.config, o.batch, o.seq_len, DType::f32,
                          {.fused_classifier = false, .gemm_workspace = false, .recompute = mode});
    return b.total_bytes();
  };
  const auto measured = [&](Recompute mode) {
    StepPlanOptions m = o;
    m.recompute = recompute_name(mode);
    return static_cast<double>(record_training_step(kCPU, m).peak_allocated_bytes);
  };
  const double none_predicted = predicted(Recompute::none),
               none_measured = measured(Recompute::none);
  std::printf("none: predicted %.0f B, measured %.0f B (%+.1f%%)\n", none_predicted, none_measured,
              100 * (none_predicted / none_measured - 1));
  for (Recompute mode : {Recompute::gelu, Recompute::mlp, Recompute::block}) {
    const double p = predicted(mode), m = measured(mode);
    std::printf(
        "%s: predicted %.0f B, measured %.0f B (%+.1f%%); change from none: predicted "
        "%.0f B, measured %.0f B\n",
        recompute_name(mode), p, m, 100 * (p / m - 1), p - none_predicted, m - none_measured);
    EXPECT_LT(m, none_measured) << recompute_name(mode) << " saved nothing";
    EXPECT_NEAR(p - none_predicted, m - none_measured, 0.03 * m) << recompute_name(mode);
    EXPECT_NEAR(p, m, 0.03 * m) << recompute_name(mode) << ": the peak itself";
  }
  EXPECT_NEAR(none_predicted, none_measured, 0.03 * none_measured);
}

TEST(Recompute, ABadModeIsOneErrorListingTheChoices) {
  TrainOptions o = gpt2("cpu", "f32");
  o.recompute = "layers";
  EXPECT_TRUE(testing::contains_all(testing::error_of([&] { Trainer t(o); }),
                                    {"--recompute", "'layers'", "none", "gelu", "mlp", "block"}));
}

}  // namespace
}  // namespace glass::train
