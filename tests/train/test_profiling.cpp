// Profiling a training step: the trace holds every launch of the profiled step exactly once with
// its phase, train_gpt's --trace/--report write a parseable trace and a self-contained report,
// bad --profile-steps are named, and the GPT cost model matches hand-computed values.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "kernels/peaks.h"
#include "tests/testing.h"
#include "train/gpt_cost.h"
#include "train/mfu.h"
#include "train/report.h"
#include "train/svg.h"
#include "train_testing.h"

namespace glass::train {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(TrainProfiler, TraceHasEveryLaunchOfTheStepOnceWithItsPhase) {
  const std::string trace = testing::temp_dir("prof_trace") + "/trace.json";
  Trainer trainer(testing::tiny_options());
  TrainProfiler profiler({trace, "", "1:1"}, 1, 1, kCPU);
  std::vector<LaunchRecord> expected;
  {
    testing::LaunchLog log;
    profiler.begin_step(1);
    const StepResult r = trainer.train_step();
    profiler.end_step(1, r.loss);
    expected = log.records;
  }
  profiler.finish("test", {});

  std::map<uint64_t, std::pair<std::string, std::string>> traced;  // seq -> (kernel, phase)
  std::map<std::string, int> spans;
  const nlohmann::json events = read_json(trace).at("traceEvents");
  for (const auto& e : events) {
    for (const char* f : {"name", "ph", "pid", "tid"}) ASSERT_TRUE(e.contains(f)) << e;
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e.contains("ts") && e.contains("dur")) << e;
    if (e["cat"] == "phase" || e["cat"] == "step") {
      spans[e["name"]]++;
      continue;
    }
    const uint64_t seq = e["args"]["seq"];
    EXPECT_FALSE(traced.count(seq)) << "launch " << seq << " appears twice";
    traced[seq] = {e["name"], e["args"]["phase"]};
  }
  ASSERT_EQ(traced.size(), expected.size());
  for (const LaunchRecord& r : expected) {
    ASSERT_TRUE(traced.count(r.seq)) << r.info.kernel << " is missing";
    EXPECT_EQ(traced[r.seq].first, r.info.kernel);
    EXPECT_EQ(traced[r.seq].second, phase_name(r.info.phase));
  }
  EXPECT_EQ(spans["step 1"], 1);
  for (const char* phase : {"forward", "backward", "optimizer"}) EXPECT_GE(spans[phase], 1);
}

TEST(TrainProfiler, RunWritesTraceAndSelfContainedReport) {
  const std::string dir = testing::temp_dir("prof_run");
  TrainOptions o = testing::tiny_options();
  o.steps = 3;
  o.eval_every = 1;
  o.trace = dir + "/trace.json";
  o.report = dir + "/report.html";
  o.profile_steps = "2:3";
  Trainer trainer(o);
  trainer.run();

  int step_spans = 0;
  const nlohmann::json events = read_json(o.trace).at("traceEvents");
  for (const auto& e : events) step_spans += e.value("cat", "") == "step";
  EXPECT_EQ(step_spans, 2);
  const std::string html = testing::file_bytes(o.report);
  for (const char* id : {"id=\"loss\"", "id=\"kernels\"", "id=\"roofline\"", "id=\"memory\""})
    EXPECT_NE(html.find(id), std::string::npos) << id;
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1))
    ++svgs;
  EXPECT_EQ(svgs, 4u);
  // Nothing to fetch: no URLs, scripts, external stylesheets or images.
  for (const char* ext : {"http:", "https:", "<script", "<link", "<img", "src="})
    EXPECT_EQ(html.find(ext), std::string::npos) << ext;
  // Both loss curves and the adamw kernel (a point of the roofline, a bar of the breakdown).
  EXPECT_TRUE(testing::contains_all(html, {">train<", ">validation<", "adamw_step", "MFU ="}));
}

// Every kernel of a real training step on cpu runs below the hardware's FLOP/s peak, the roof the
// summary and report draw (the old measured-GEMM peak had the GEMMs at or above it: x floor 1.0).
TEST(TrainProfiler, NoKernelOfAStepIsAboveTheHardwarePeak) {
  Trainer trainer(testing::tiny_options());
  trainer.train_step();  // the allocator's cache filled, as in a profiled step 2
  TraceRecorder recorder;
  recorder.start();
  recorder.begin_step(2);
  trainer.train_step();
  recorder.end_step();
  recorder.stop();
  const DevicePeaks peaks = kernels::peaks_for(kCPU);
  const KernelSummary s = summarize_kernels(recorder.launches(), peaks, DType::f32);
  ASSERT_FALSE(s.rows.empty());
  for (const KernelRow& r : s.rows) EXPECT_LE(r.gflops * 1e9, peaks.f32_flops) << r.kernel;
  EXPECT_NE(s.table().find("attainable (measured"), std::string::npos) << s.table();
}

// The roofline plot marks both roofs, numbers its points by their row in the kernel table and
// names them in a key (a row without FLOPs is no point and gets no number).
TEST(TrainProfiler, RooflineMarksBothRoofsAndNamesEveryPoint) {
  KernelSummary s;
  s.peaks = {"test", 1e12, 0, 100e9, "made up for the test"};
  s.peaks.attainable_f32_flops = 4e11;
  KernelRow gemm, add, fill;
  gemm.kernel = "gemm", gemm.flops = 2e9, gemm.bytes = 1e7, gemm.gflops = 300, gemm.calls = 2;
  gemm.roof = roofline(OpCost{gemm.flops, gemm.bytes}, s.peaks, DType::f32);
  fill.kernel = "fill";  // no FLOPs: a row of the table, not a point
  add.kernel = "add", add.flops = 1e6, add.bytes = 1.2e7, add.gflops = 5, add.calls = 7;
  add.roof = roofline(OpCost{add.flops, add.bytes}, s.peaks, DType::f32);
  s.rows = {gemm, fill, add};
  const std::string html = render_report({"t", {}, {}, {}, s, {}});
  EXPECT_TRUE(testing::contains_all(
      html, {"hardware roof", "hardware peak 1000 GFLOP/s", ">attainable<",
             "attainable 400 GFLOP/s (measured GEMM)",
             "<li value=\"1\">gemm: ", "<li value=\"3\">add: ", ">1</text>", ">3</text>"}));
  EXPECT_EQ(html.find("<li value=\"2\">"), std::string::npos);
}

TEST(TrainProfiler, BadProfileStepsAreNamed) {
  EXPECT_TRUE(testing::contains_all(testing::error_of([] {
                                      TrainProfiler({"t.json", "", "3:2"}, 1, 6, kCPU);
                                    }),
                                    {"--profile-steps 3:2", "1 <= a <= b <= 6"}));
  EXPECT_TRUE(testing::contains_all(testing::error_of([] {
                                      TrainProfiler({"t.json", "", "2:9"}, 1, 6, kCPU);
                                    }),
                                    {"--profile-steps 2:9"}));
  EXPECT_TRUE(testing::contains_all(testing::error_of([] {
                                      TrainProfiler({"", "r.html", "x"}, 1, 6, kCPU);
                                    }),
                                    {"--profile-steps 'x'", "a:b"}));
  EXPECT_TRUE(testing::contains_all(testing::error_of([] {
                                      TrainProfiler({"", "", "1:2"}, 1, 6, kCPU);
                                    }),
                                    {"--trace or --report"}));
}

// L=2, C=8, H=2, V=10, block 16; B=2, T=4.
GPTConfig small_config() { return {10, 16, 2, 2, 8, 0}; }

TEST(GptCost, MemoryBudgetByHand) {
  // N = V C + block C + L (12 C^2 + 13 C) + 2 C = 80 + 128 + 2 * 872 + 16 = 1968, in 28 tensors.
  const GptBudgetOptions no_workspace{.gemm_workspace = false};
  const GptMemoryBudget bf16 = gpt_memory_budget(small_config(), 2, 4, DType::bf16, no_workspace);
  EXPECT_EQ(bf16.parameters, 1968);
  EXPECT_DOUBLE_EQ(bf16.parameters_bytes, 2 * 1968);
  EXPECT_DOUBLE_EQ(bf16.master_bytes, 4 * 1968);
  EXPECT_DOUBLE_EQ(bf16.adam_bytes, 8 * 1968);
  // A model this small peaks at the end of backward (the tied table's gradient): no activation
  // but the batch (2 x 4 B T = 64), every other gradient in fp32 (4 (1968 - 80) = 7552) and the
  // table's (320); the table's two shares in fp32 and the embedding's own in bf16 (2 320 + 160).
  EXPECT_STREQ(bf16.peak_at, "the tied embedding's gradient (the end of backward)");
  EXPECT_DOUBLE_EQ(bf16.activations_bytes, 64);
  EXPECT_DOUBLE_EQ(bf16.gradients_bytes, 7552 + 320);
  EXPECT_DOUBLE_EQ(bf16.temporaries_bytes, 800);
  // Every tensor here is under 1 MiB, so the allocator rounds each up to 512 B: the bf16
  // parameters 28 x 512; the fp32 masters, the gradients and each moment 3 tensors of 1024 B a
  // layer (c_attn's, c_fc's and the MLP's c_proj's weights) and 9 + the rest of 512 B:
  // 2 (3 1024 + 9 512) + 4 512 = 17408; the batch 2 512, the temporaries 3 512.
  EXPECT_DOUBLE_EQ(bf16.total_bytes(), 28 * 512 + 17408 + 2 * 17408 + 2 * 512 + 17408 + 3 * 512);
  EXPECT_DOUBLE_EQ(bf16.workspace_bytes, 0);
  // The GPUs' GEMM workspace, 32 MiB, when asked for (the default).
  EXPECT_DOUBLE_EQ(gpt_memory_budget(small_config(), 2, 4, DType::bf16).total_bytes(),
                   bf16.total_bytes() + (32 << 20));
  // f32 keeps no separate master copy.
  const GptMemoryBudget f32 = gpt_memory_budget(small_config(), 2, 4, DType::f32, no_workspace);
  EXPECT_DOUBLE_EQ(f32.master_bytes, 0);
  EXPECT_DOUBLE_EQ(f32.parameters_bytes, 4 * 1968);
}

// --recompute in the budget (the header): at a batch whose peak is the LM head's backward, where
// every layer's saved activations are alive, a layer keeps 4 BTC fewer under gelu (the GELU's
// output) and only its input, 2 BTC, under block; the rebuilt layer counts at the last block's
// backward, not here.
TEST(GptCost, RecomputeModesKeepLessPerLayer) {
  const GptBudgetOptions none{.gemm_workspace = false};
  GptBudgetOptions gelu = none, block = none;
  gelu.recompute = Recompute::gelu;
  block.recompute = Recompute::block;
  const double B = 64, T = 16, C = 8, L = 2, b = 4;
  const GptMemoryBudget kept = gpt_memory_budget(small_config(), 64, 16, DType::f32, none);
  const GptMemoryBudget less = gpt_memory_budget(small_config(), 64, 16, DType::f32, gelu);
  const GptMemoryBudget input = gpt_memory_budget(small_config(), 64, 16, DType::f32, block);
  for (const GptMemoryBudget* m : {&kept, &less, &input}) {
    EXPECT_STREQ(m->peak_at, "the LM head's backward");
    EXPECT_DOUBLE_EQ(m->recompute_bytes, 0);
  }
  EXPECT_DOUBLE_EQ(kept.activations_bytes - less.activations_bytes, L * b * B * T * 4 * C);
  // none keeps per layer 16 C in b (the GELU input's rows padded: 4 C = 32 is a multiple of 8)
  // and 4 + H = 6 fp32 statistics per token; block keeps 2 C.
  EXPECT_DOUBLE_EQ(kept.activations_bytes - input.activations_bytes,
                   L * B * T * (b * 16 * C + 4 * 6 - b * 2 * C));
}

TEST(GptCost, StepFlopsByHand) {
  // N' = N - block C = 1968 - 128 = 1840; 6 N' = 11040; 12 L T C = 12 * 2 * 4 * 8 = 768.
  const GptStepFlops f = gpt_step_flops(small_config(), 2, 4);
  EXPECT_DOUBLE_EQ(f.six_n, 11040);
  EXPECT_DOUBLE_EQ(f.attention, 768);
  EXPECT_DOUBLE_EQ(f.total(), (11040 + 768) * 8);
  // MFU: 11808 FLOPs/token at 1000 tokens/s on a 11.808 MFLOP/s device is 100%.
  const Mfu m = gpt_mfu(small_config(), 4, {"dev", 11.808e6, 0, 1e9, "test peaks"}, DType::f32);
  EXPECT_NEAR(m.of(1000), 1.0, 1e-12);
  EXPECT_TRUE(
      testing::contains_all(m.formula, {"6 N + 12 L T C", "1840", "LM head", "test peaks"}));
  EXPECT_TRUE(testing::contains_all(
      testing::error_of([] { gpt_memory_budget(small_config(), 0, 4, DType::f32); }), {"batch 0"}));
  // Recomputed forward per token (C = 8, T = 4, L = 2): block 2 (12 C^2) + 4 T C = 1664 per
  // layer; mlp 16 C^2 = 1024 per layer; gelu the c_fc GEMM 8 C^2 = 512 where the GELU is in its
  // epilogue, nothing counted on cpu. HFU adds them to the model's 11808 per token.
  EXPECT_DOUBLE_EQ(recompute_flops_per_token(small_config(), 4, Recompute::block, true), 2 * 1664);
  EXPECT_DOUBLE_EQ(recompute_flops_per_token(small_config(), 4, Recompute::mlp, true), 2 * 1024);
  EXPECT_DOUBLE_EQ(recompute_flops_per_token(small_config(), 4, Recompute::gelu, true), 2 * 512);
  EXPECT_DOUBLE_EQ(recompute_flops_per_token(small_config(), 4, Recompute::gelu, false), 0);
  const Mfu h = with_recompute(m, small_config(), 4, Recompute::block, false);
  EXPECT_NEAR(h.of(1000), 1.0, 1e-12);
  EXPECT_NEAR(h.hfu_of(1000), (11808.0 + 3328) / 11808, 1e-12);
  EXPECT_TRUE(testing::contains_all(h.formula, {"HFU", "--recompute block", "3328"}));
}

// Data parallelism (roofline gpt --world N --zero Z): one rank's budget is that of batch / N rows
// plus the gradient buckets, 4 N; ZeRO-1 keeps 8 ceil(N / world) of moments instead of 8 N.
TEST(GptCost, DataParallelAndZeroOneBudgetsByHand) {
  const GptMemoryBudget one_rank = gpt_memory_budget(small_config(), 2, 4, DType::f32);
  const GptMemoryBudget ddp =
      gpt_memory_budget(small_config(), 4, 4, DType::f32, {.world = 2, .zero = 0});
  EXPECT_DOUBLE_EQ(ddp.activations_bytes, one_rank.activations_bytes);  // 2 of the 4 rows
  EXPECT_DOUBLE_EQ(ddp.gradient_buckets_bytes, 4 * 1968);
  EXPECT_DOUBLE_EQ(ddp.adam_bytes, 8 * 1968);
  // Before the allocator's rounding, which rounds the buckets as one more tensor.
  EXPECT_DOUBLE_EQ(ddp.total_bytes() - ddp.size_class_bytes,
                   one_rank.total_bytes() - one_rank.size_class_bytes + 4 * 1968);
  const GptMemoryBudget zero =
      gpt_memory_budget(small_config(), 6, 4, DType::f32, {.world = 3, .zero = 1});
  EXPECT_DOUBLE_EQ(zero.adam_bytes, 8 * 656);  // 1968 / 3
  EXPECT_DOUBLE_EQ(zero.activations_bytes, one_rank.activations_bytes);
  // One rank: nothing to shard, no buckets.
  const GptMemoryBudget alone =
      gpt_memory_budget(small_config(), 2, 4, DType::f32, {.world = 1, .zero = 1});
  EXPECT_DOUBLE_EQ(alone.total_bytes(), one_rank.total_bytes());
  EXPECT_TRUE(testing::contains_all(
      testing::error_of([] { gpt_memory_budget(small_config(), 3, 4, DType::f32, {.world = 2}); }),
      {"--batch 3", "--world 2"}));
  EXPECT_TRUE(testing::contains_all(testing::error_of([] {
                                      gpt_memory_budget(small_config(), 2, 4, DType::f32,
                                                        {.world = 2, .zero = 2});
                                    }),
                                    {"--zero 2"}));
}

TEST(Svg, EscapesAndSkipsNonPositiveOnLogAxes) {
  EXPECT_EQ(html_escape("a<b & \"c\">'"), "a&lt;b &amp; &quot;c&quot;&gt;&#39;");
  Series s("s", "#000", {{0, 1}, {10, 100}, {100, 0}}, false);
  s.labels = {"zero x", "kept", "zero y"};
  const std::string svg = svg_plot("t", {"x", true}, {"y", true}, {s});
  EXPECT_NE(svg.find("kept"), std::string::npos);
  EXPECT_EQ(svg.find("zero x"), std::string::npos);
  EXPECT_EQ(svg.find("zero y"), std::string::npos);
}

}  // namespace
}  // namespace glass::train
