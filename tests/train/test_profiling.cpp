// Profiling a training step: the trace holds every launch of the profiled step exactly once with
// its phase, train_gpt's --trace/--report write a parseable trace and a self-contained report,
// bad --profile-steps are named, and the GPT cost model matches hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "autograd/ops.h"
#include "engine/allocator.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/peaks.h"
#include "report_testing.h"
#include "tests/testing.h"
#include "train/gpt_cost.h"
#include "train/mfu.h"
#include "train/report.h"
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
    profiler.end_step({1, r.ms, r.tokens_per_s, r.host_syncs}, r.loss);
    expected = log.records;
  }
  profiler.finish("test", {}, {});

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
    const nlohmann::json& args = e["args"];
    for (const char* f :
         {"kernel", "module", "shapes", "dtype", "flops", "bytes", "node_id", "phase", "op"})
      ASSERT_TRUE(args.contains(f)) << f << " missing in " << e;
    // `<op> <module> [<shapes>]`: the op first (the kernel where there is none).
    const std::string op = args["op"], name = e["name"];
    EXPECT_TRUE(name.starts_with(op.empty() ? args["kernel"].get<std::string>() : op)) << e;
    if (!args["module"].get<std::string>().empty()) {
      EXPECT_NE(name.find(" " + args["module"].get<std::string>()), std::string::npos) << e;
    }
    if (!args["shapes"].get<std::string>().empty()) {
      EXPECT_TRUE(name.ends_with(" [" + args["shapes"].get<std::string>() + "]")) << e;
    }
    const uint64_t seq = args["seq"];
    EXPECT_FALSE(traced.count(seq)) << "launch " << seq << " appears twice";
    traced[seq] = {args["kernel"], args["phase"]};
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

using testing::report_json;

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

  int step_spans = 0, step3_launches = 0;
  const nlohmann::json events = read_json(o.trace).at("traceEvents");
  for (const auto& e : events) {
    step_spans += e.value("cat", "") == "step";
    step3_launches +=
        e["ph"] == "X" && e.contains("args") && e["args"].contains("seq") && e["args"]["step"] == 3;
  }
  EXPECT_EQ(step_spans, 2);
  const std::string html = testing::file_bytes(o.report);
  // Nothing to fetch: no URLs, external scripts, stylesheets or images.
  // (The SVG namespace is a name, not an address: nothing is fetched from it.)
  std::string page = html;
  const std::string svg_ns = "http://www.w3.org/2000/svg";
  for (size_t at = page.find(svg_ns); at != std::string::npos; at = page.find(svg_ns))
    page.erase(at, svg_ns.size());
  for (const char* ext : {"http:", "https:", "<link", "<img", "src=", "@import"})
    EXPECT_EQ(page.find(ext), std::string::npos) << ext;
  EXPECT_TRUE(testing::contains_all(html, {"document.body.dataset.ready", "data-launch"}));
  const nlohmann::json d = report_json(html);
  EXPECT_EQ(d["step"], 3);
  EXPECT_EQ(static_cast<int>(d["launches"].size()), step3_launches);
  EXPECT_EQ(d["ledger"]["bytes"].size(), d["launches"].size());
  EXPECT_FALSE(d["tape"].empty());
  EXPECT_EQ(d["loss"]["train"].size(), 3u);
  EXPECT_EQ(d["loss"]["val"].size(), 3u);
  std::map<std::string, nlohmann::json> cards;
  for (const auto& c : d["summary"]) cards[c["key"]] = c;
  for (const char* k : {"model", "device", "dtype", "tokens_per_s", "ms_per_step", "mfu", "hfu",
                        "busy", "peak_allocated", "peak_reserved", "launches", "host_syncs"})
    ASSERT_TRUE(cards.count(k)) << k;
  // Every number explains itself: MFU names its formula and the peak's source.
  EXPECT_TRUE(testing::contains_all(cards["mfu"]["explain"], {"6 N + 12 L T C", "peak"}));
  EXPECT_EQ(cards["launches"]["value"], step3_launches);
  const double busy = cards["busy"]["value"];
  EXPECT_GT(busy, 0);
  EXPECT_LE(busy, 1);
  // Every launch of a forward node carries its module (the model's modules push their paths).
  int forward_with_module = 0, forward = 0;
  for (const auto& l : d["launches"])
    if (l["phase"] == "forward" && l["node"].get<int64_t>() >= 0) {
      ++forward;
      forward_with_module += !l["module"].get<std::string>().empty();
    }
  EXPECT_GT(forward, 0);
  EXPECT_GT(forward_with_module, forward / 2);
}

// The trace's flow events come in pairs (one "s", one "f" per id), the tail inside a forward
// slice of node n and the head inside a backward slice of the same node; the memory ledger's
// categories are counters after every launch of the recorded step.
TEST(TrainProfiler, TraceFlowsPairForwardWithBackwardAndLedgerIsCounted) {
  const std::string dir = testing::temp_dir("prof_flow");
  TrainOptions o = testing::tiny_options();
  o.steps = 2;
  o.trace = dir + "/trace.json";
  Trainer trainer(o);
  trainer.run();
  const nlohmann::json events = read_json(o.trace).at("traceEvents");
  struct Slice {
    double ts, end;
    int64_t node;
    std::string phase;
  };
  std::map<std::pair<int, int>, std::vector<Slice>> slices;  // (pid, tid) -> launches
  std::map<uint64_t, std::vector<nlohmann::json>> flows;
  std::set<int64_t> backward_nodes_with_forward, forward_nodes;
  int ledger_counters = 0, launches = 0;
  for (const auto& e : events) {
    if (e["ph"] == "X" && e.contains("args") && e["args"].contains("seq")) {
      slices[{e["pid"], e["tid"]}].push_back({e["ts"].get<double>(),
                                              e["ts"].get<double>() + e["dur"].get<double>(),
                                              e["args"]["node_id"], e["args"]["phase"]});
      launches += e["args"]["step"] == 2;
      if (e["args"]["phase"] == "forward")
        forward_nodes.insert(e["args"]["node_id"].get<int64_t>());
    }
    if (e["ph"] == "s" || e["ph"] == "f") flows[e["id"]].push_back(e);
    if (e["ph"] == "C" && e["name"] == "memory ledger (MiB)") {
      ++ledger_counters;
      for (const char* c : kLedgerCategories) EXPECT_TRUE(e["args"].contains(c)) << c;
    }
  }
  auto node_at = [&](const nlohmann::json& e, const char* phase) {
    for (const Slice& s : slices[{e["pid"], e["tid"]}])
      if (s.phase == phase && s.ts <= e["ts"].get<double>() && e["ts"].get<double>() <= s.end)
        return s.node;
    return int64_t{-2};
  };
  ASSERT_FALSE(flows.empty());
  int backward_launches_of_forward_nodes = 0;
  for (const auto& [key, ss] : slices)
    for (const Slice& s : ss)
      backward_launches_of_forward_nodes += s.phase == "backward" && forward_nodes.count(s.node);
  EXPECT_EQ(static_cast<int>(flows.size()), backward_launches_of_forward_nodes);
  for (const auto& [id, pair] : flows) {
    ASSERT_EQ(pair.size(), 2u) << "flow " << id;
    const nlohmann::json& s = pair[0]["ph"] == "s" ? pair[0] : pair[1];
    const nlohmann::json& f = pair[0]["ph"] == "s" ? pair[1] : pair[0];
    ASSERT_EQ(s["ph"], "s");
    ASSERT_EQ(f["ph"], "f");
    const int64_t node = node_at(s, "forward");
    EXPECT_GE(node, 0) << s;
    EXPECT_EQ(node_at(f, "backward"), node) << f;
  }
  EXPECT_EQ(ledger_counters, launches);
}

// The tape graph's gradient norms are the step's true |d loss / d node output|: the loss node's is
// 1, and the logits' is the norm of (softmax(logits) - onehot(targets)) / N, worked out here on the
// host from the logits of the same batch and weights (another trainer, one step in). The pass that
// measures them leaves the training bit for bit as it was.
TEST(TrainProfiler, TapeGraphCarriesTheRecordedStepsGradientNorms) {
  const std::string dir = testing::temp_dir("prof_gnorm");
  TrainOptions o = testing::tiny_options();
  o.dropout = 0;  // the host's logits below are forward's without a mask
  o.steps = 2;
  o.report = dir + "/report.html";
  Trainer trainer(o);
  trainer.run();
  const nlohmann::json d = report_json(testing::file_bytes(o.report));
  ASSERT_EQ(d["step"], 2);
  const nlohmann::json& tape = d["tape"];
  ASSERT_FALSE(tape.empty());
  for (const auto& n : tape) {
    ASSERT_TRUE(n["grad_norm"].is_number()) << n;  // every node of a GPT's tape gets a gradient
    EXPECT_TRUE(std::isfinite(n["grad_norm"].get<double>())) << n;
  }
  const nlohmann::json& loss_node = tape.back();  // the root: made last
  EXPECT_NEAR(loss_node["grad_norm"].get<double>(), 1.0, 1e-12) << loss_node;
  const int64_t logits_id = loss_node["inputs"][0];
  nlohmann::json logits_node;
  for (const auto& n : tape)
    if (n["id"] == logits_id) logits_node = n;
  ASSERT_FALSE(logits_node.is_null());

  // The same run one step in: the weights step 2 starts from, and step 2's batch.
  Trainer again(o);
  again.train_step();
  const BatchLoader loader(&again.data().train, o.batch, o.seq_len, o.shuffle, o.seed);
  const Batch b = loader.rows(1, 0, o.batch, kCPU);
  std::vector<float> logits;
  {
    NoGradGuard no_grad;
    logits = to_vector<float>(again.model().forward(b.x));
  }
  const std::vector<int32_t> targets = to_vector<int32_t>(b.y);
  const size_t rows = targets.size(), vocab = logits.size() / rows;
  // The logits as the loss reads them: [B, T, V], or viewed as [B*T, V].
  EXPECT_TRUE(logits_node["shape"] == fmt::format("[{}, {}, {}]", o.batch, o.seq_len, vocab) ||
              logits_node["shape"] == fmt::format("[{}, {}]", rows, vocab))
      << logits_node;
  double sum_sq = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* z = &logits[r * vocab];
    double mx = z[0], denom = 0;
    for (size_t v = 0; v < vocab; ++v) mx = std::max(mx, double(z[v]));
    for (size_t v = 0; v < vocab; ++v) denom += std::exp(z[v] - mx);
    for (size_t v = 0; v < vocab; ++v) {
      const double g =
          (std::exp(z[v] - mx) / denom - (static_cast<int32_t>(v) == targets[r] ? 1 : 0)) /
          static_cast<double>(rows);
      sum_sq += g * g;
    }
  }
  EXPECT_NEAR(logits_node["grad_norm"].get<double>(), std::sqrt(sum_sq), 1e-4 * std::sqrt(sum_sq));
}

// The gradient-norm pass runs outside the recorded step: with --report the recorded step has the
// same launches and host syncs as without it, and the run trains the same bits (dropout on: the
// pass puts the generator back; --grad-accum 2: it runs only the first micro-step).
TEST(TrainProfiler, GradientNormPassLeavesTheRecordedStepAndTheTrainingAsTheyWere) {
  for (const char* device : {"cpu", "emu"}) {
    SCOPED_TRACE(device);
    const std::string dir = testing::temp_dir(std::string("prof_gnorm_bits_") + device);
    TrainOptions o = testing::tiny_options();
    o.device = device;
    o.steps = 3;
    o.grad_accum = 2;
    Trainer plain(o);
    std::vector<StepResult> expected;
    size_t step2_launches = 0;
    for (int s = 1; s <= 3; ++s) {
      testing::LaunchLog log;
      expected.push_back(plain.train_step());
      if (s == 2) step2_launches = log.records.size();
    }
    o.report = dir + "/report.html";
    o.metrics = dir + "/metrics.jsonl";
    Trainer measured(o);
    measured.run();
    const nlohmann::json d = report_json(testing::file_bytes(o.report));
    EXPECT_EQ(d["launches"].size(), step2_launches);
    ASSERT_TRUE(d["tape"].back()["grad_norm"].is_number());
    EXPECT_NEAR(d["tape"].back()["grad_norm"].get<double>(), 0.5, 1e-12);  // d(loss/2)/d loss
    std::ifstream metrics(o.metrics);
    std::string line;
    for (const StepResult& r : expected) {
      ASSERT_TRUE(std::getline(metrics, line));
      const nlohmann::json m = nlohmann::json::parse(line);
      EXPECT_EQ(m["step"], r.step);
      EXPECT_EQ(m["loss"].get<double>(), r.loss) << "step " << r.step;
      EXPECT_EQ(m["grad_norm"].get<double>(), r.grad_norm) << "step " << r.step;
      EXPECT_EQ(m["host_syncs"].get<int64_t>(), r.host_syncs) << "step " << r.step;
    }
  }
}

// The timeline's host work: a run with a checkpoint after the recorded step has the step's batch
// read ("data", before its first launch), its status read ("host wait") and the checkpoint
// ("checkpoint", after its last launch) as host spans, in the report and on the trace's host track.
TEST(TrainProfiler, HostSpansOfDataAndCheckpointAreInTheReportAndTrace) {
  const std::string dir = testing::temp_dir("prof_spans");
  TrainOptions o = testing::tiny_options();
  o.steps = 3;
  o.checkpoint_dir = dir + "/ck";
  o.checkpoint_every = 2;
  o.report = dir + "/report.html";
  o.trace = dir + "/trace.json";
  Trainer trainer(o);
  trainer.run();
  const nlohmann::json d = report_json(testing::file_bytes(o.report));
  ASSERT_EQ(d["step"], 2);
  double first_launch = 1e300, last_end = 0;
  for (const auto& l : d["launches"]) {
    first_launch = std::min(first_launch, l["start"].get<double>());
    last_end = std::max(last_end, l["start"].get<double>() + l["dur"].get<double>());
  }
  std::map<std::string, nlohmann::json> by_phase;
  for (const auto& h : d["host_spans"]) {
    EXPECT_GE(h["start"].get<double>(), 0) << h;
    EXPECT_GE(h["dur"].get<double>(), 0) << h;
    by_phase[h["phase"]] = h;
  }
  ASSERT_TRUE(by_phase.count("data") && by_phase.count("checkpoint") && by_phase.count("host wait"))
      << d["host_spans"];
  EXPECT_EQ(by_phase["data"]["start"], 0.0);  // the timeline starts with the batch read
  EXPECT_LE(by_phase["data"]["start"].get<double>(), first_launch);
  EXPECT_GE(by_phase["checkpoint"]["start"].get<double>(), last_end);
  EXPECT_GT(by_phase["checkpoint"]["dur"].get<double>(), 0);

  std::set<std::pair<std::string, int64_t>> traced;  // (phase, step)
  const nlohmann::json trace = read_json(o.trace);
  for (const auto& e : trace.at("traceEvents"))
    if (e["ph"] == "X" && e.value("cat", "") == "host")
      traced.insert({e["args"]["phase"].get<std::string>(), e["args"]["step"].get<int64_t>()});
  for (const char* phase : {"data", "host wait", "checkpoint"})
    EXPECT_TRUE(traced.count({phase, 2})) << phase;
}

// What the ledger attributes (state, gradients, saved activations) is never more than the
// allocator measured after the same launch; saved activations are there when forward ends and gone
// when backward ends; from then until the optimizer's update every parameter has its gradient.
TEST(TrainProfiler, MemoryLedgerNeverAttributesMoreThanIsAllocated) {
  const std::string dir = testing::temp_dir("prof_ledger");
  TrainOptions o = testing::tiny_options();
  o.steps = 2;
  o.report = dir + "/report.html";
  Trainer trainer(o);
  trainer.run();
  const nlohmann::json d = report_json(testing::file_bytes(o.report));
  const nlohmann::json& ls = d["launches"];
  const nlohmann::json& bytes = d["ledger"]["bytes"];
  ASSERT_EQ(bytes.size(), ls.size());
  ASSERT_EQ(d["ledger"]["categories"].size(), kLedgerCategories.size());
  int64_t grads = 0;
  for (const Tensor& p : trainer.model().parameters())
    grads += static_cast<int64_t>(Allocator::for_device(kCPU).class_of(p.storage()->nbytes));
  size_t last_forward = 0, last_backward = 0;
  for (size_t i = 0; i < ls.size(); ++i) {
    if (ls[i]["phase"] == "forward") last_forward = i;
    if (ls[i]["phase"] == "backward") last_backward = i;
    int64_t attributed = 0;
    for (size_t c = 0; c < 5; ++c) attributed += bytes[i][c].get<int64_t>();
    const int64_t allocated = ls[i]["allocated"];
    EXPECT_LE(attributed, allocated) << "launch " << i << " " << ls[i];
    EXPECT_EQ(attributed + bytes[i][5].get<int64_t>(), allocated) << "launch " << i;
    EXPECT_EQ(bytes[i][6].get<int64_t>(), ls[i]["reserved"].get<int64_t>() - allocated);
  }
  ASSERT_LT(last_forward, last_backward);
  EXPECT_GT(bytes[last_forward][4].get<int64_t>(), 0);  // saved activations
  EXPECT_EQ(bytes[last_backward + 1][4].get<int64_t>(), 0);
  EXPECT_EQ(bytes[last_backward + 1][3].get<int64_t>(), grads);  // gradients
  EXPECT_EQ(bytes[0][3].get<int64_t>(), 0);
  // The state: f32 parameters (no masters apart from them) and AdamW's m and v.
  EXPECT_EQ(bytes[0][0].get<int64_t>(), grads);
  EXPECT_EQ(bytes[0][1].get<int64_t>(), 0);
  EXPECT_EQ(bytes[0][2].get<int64_t>(), 2 * grads);
  // The largest tensors alive at the peak, largest first.
  const nlohmann::json& largest = d["ledger"]["largest"];
  ASSERT_FALSE(largest.empty());
  for (size_t i = 1; i < largest.size(); ++i)
    EXPECT_GE(largest[i - 1]["bytes"].get<int64_t>(), largest[i]["bytes"].get<int64_t>());
}

// Every kernel of a real training step on cpu runs below the hardware's FLOP/s peak, the roof the
// summary and report draw (the old measured-GEMM peak had the GEMMs at or above it: x floor 1.0).
// The launches of a tiny model's second step on cpu, in `dtype`.
std::vector<TracedLaunch> recorded_step(const std::string& dtype) {
  TrainOptions o = testing::tiny_options();
  o.dtype = dtype;
  Trainer trainer(o);
  trainer.train_step();  // the allocator's cache filled, as in a profiled step 2
  TraceRecorder recorder;
  recorder.start();
  recorder.begin_step(2);
  trainer.train_step();
  recorder.end_step();
  recorder.stop();
  return recorder.launches();
}

TEST(TrainProfiler, NoKernelOfAStepIsAboveTheHardwarePeak) {
  const DevicePeaks peaks = kernels::peaks_for(kCPU);
  const KernelSummary s = summarize_kernels(recorded_step("f32"), peaks);
  ASSERT_FALSE(s.rows.empty());
  for (const KernelRow& r : s.rows) EXPECT_LE(r.gflops * 1e9, peaks.f32_flops) << r.kernel;
  EXPECT_NE(s.table().find("attainable (measured"), std::string::npos) << s.table();
}

// In bf16 the products (the GEMMs, flash attention's) run on vdpbf16ps where the core has
// AVX512-BF16 and are judged against the bf16 peak (2x the f32 one, which they may pass); the rest
// against the f32 peak. Judged against f32 alone, the summary and the explorer's roofline put the
// GEMMs above their roof.
TEST(TrainProfiler, Bf16KernelsAreJudgedAgainstTheRoofOfTheirUnit) {
  const DevicePeaks peaks = kernels::peaks_for(kCPU);
  const KernelSummary s = summarize_kernels(recorded_step("bf16"), peaks);
  ASSERT_FALSE(s.rows.empty());
  const ComputeUnit products =
      kernels::cpu::bf16_gemm_fast_path() ? ComputeUnit::tensor_core_bf16 : ComputeUnit::cuda_core;
  for (const KernelRow& r : s.rows) {
    const bool product = r.kernel == "gemm" || r.kernel == "gemm_bgrad_a" ||
                         r.kernel == "gemm_gelu_aux" || r.kernel.starts_with("flash_attention");
    EXPECT_EQ(r.unit, product ? products : ComputeUnit::cuda_core) << r.kernel;
    if (r.flops > 0) {
      EXPECT_LE(r.gflops, r.roof.ridge * peaks.bytes_per_s / 1e9) << r.kernel;
    }
  }
  if (products == ComputeUnit::tensor_core_bf16) {
    EXPECT_NE(s.table().find("vdpbf16ps (bf16)"), std::string::npos) << s.table();
  }
}

// The roofline's data: a point per kernel with FLOPs (with its unit's roof), the kernels without
// FLOPs listed apart with their bytes, the hardware roof and the attainable one with sources.
TEST(TrainProfiler, RooflineListsZeroFlopKernelsApartAndNamesItsRoofs) {
  ReportInputs in;
  in.kernels.peaks = {"test", 1e12, 0, 100e9, "made up for the test"};
  in.kernels.peaks.attainable_f32_flops = 4e11;
  in.kernels.peaks.attainable_source = "measured here";
  auto launch = [](const char* kernel, double flops, double bytes, uint64_t seq) {
    TracedLaunch l;
    l.record.info.kernel = kernel;
    l.record.info.flops = flops;
    l.record.info.bytes = bytes;
    l.record.info.phase = Phase::forward;
    l.record.seq = seq;
    l.record.start_us = 10.0 * static_cast<double>(seq);
    l.record.end_us = l.record.start_us + 5;
    l.step = 1;
    return l;
  };
  in.step_launches = {launch("gemm", 2e6, 1e5, 0), launch("copy", 0, 4e5, 1),
                      launch("gemm", 2e6, 1e5, 2)};
  in.kernels = summarize_kernels(in.step_launches, in.kernels.peaks);
  const nlohmann::json r = report_data(in)["roofline"];
  ASSERT_EQ(r["points"].size(), 1u);
  EXPECT_EQ(r["points"][0]["kernel"], "gemm");
  EXPECT_EQ(r["points"][0]["calls"], 2);
  EXPECT_DOUBLE_EQ(r["points"][0]["roof_gflops"].get<double>(), 1000);
  ASSERT_EQ(r["memory_only"].size(), 1u);
  EXPECT_EQ(r["memory_only"][0]["kernel"], "copy");
  EXPECT_DOUBLE_EQ(r["memory_only"][0]["bytes"].get<double>(), 4e5);
  EXPECT_DOUBLE_EQ(r["memory_only"][0]["gbps"].get<double>(), 4e5 / 5 / 1e3);
  EXPECT_DOUBLE_EQ(r["attainable_gflops"].get<double>(), 400);
  EXPECT_EQ(r["attainable_source"], "measured here");
  EXPECT_EQ(r["source"], "made up for the test");
  // The embedded JSON cannot end its <script> early.
  in.title = "</script><b>";
  in.notes = {"</script>"};
  const std::string html = render_report(in);
  EXPECT_EQ(html.find("</script><b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;/script&gt;&lt;b&gt;"), std::string::npos);
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
  // Every tensor here is under 1 MiB, so the allocator rounds each up to 512 B, and the point
  // with the most tensors holds most: the parameters 28 x 512; the fp32 masters and each moment
  // 3 tensors of 1024 B a layer (c_attn's, c_fc's and the MLP's c_proj's weights) and 9 + the
  // rest of 512 B: 2 (3 1024 + 9 512) + 4 512 = 17408. The end of backward (the tied table's
  // gradient) holds the batch (2 x 512), every gradient in fp32 (17408) and 3 temporaries of 512
  // B; the first block's MLP backward (here also the last but one) one block more: 15 saved
  // tensors (the top's 3 that remain, the batch's 2, block 0's 13 less its next residual sum and
  // statistics), 22 gradients (the table's share, block 1's 3 x 1024 + 9 x 512, ln_f's 2, the
  // MLP's 4 in bf16) and 3 temporaries: 40 x 512.
  EXPECT_STREQ(bf16.peak_at, "the last block but one's MLP backward");
  EXPECT_DOUBLE_EQ(bf16.total_bytes(), 28 * 512 + 3 * 17408 + 40 * 512);
  EXPECT_GT(bf16.total_bytes(), 28 * 512 + 4 * 17408 + 5 * 512);  // the end of backward's
  EXPECT_DOUBLE_EQ(bf16.workspace_bytes, 0);
  // The GPUs' GEMM workspace, 32 MiB, when asked for (the default).
  EXPECT_DOUBLE_EQ(gpt_memory_budget(small_config(), 2, 4, DType::bf16).total_bytes(),
                   bf16.total_bytes() + (32 << 20));
  // f32 keeps no separate master copy.
  const GptMemoryBudget f32 = gpt_memory_budget(small_config(), 2, 4, DType::f32, no_workspace);
  EXPECT_DOUBLE_EQ(f32.master_bytes, 0);
  EXPECT_DOUBLE_EQ(f32.parameters_bytes, 4 * 1968);
}

// --recompute in the budget (the header), at a batch whose peak is the last block's MLP backward:
// a layer keeps 4 BTC fewer under gelu (the GELU's output) and only its input, 2 BTC, under
// block, and the layer backward is running holds what it rebuilt (gelu: the GELU's output;
// block: the whole layer as none keeps it).
TEST(GptCost, RecomputeModesKeepLessPerLayer) {
  GptBudgetOptions none{.gemm_workspace = false}, gelu = none, block = none;
  gelu.recompute = Recompute::gelu;
  block.recompute = Recompute::block;
  const double B = 64, T = 16, C = 8, L = 2, b = 4;
  const GptMemoryBudget kept = gpt_memory_budget(small_config(), 64, 16, DType::f32, none);
  const GptMemoryBudget less = gpt_memory_budget(small_config(), 64, 16, DType::f32, gelu);
  const GptMemoryBudget input = gpt_memory_budget(small_config(), 64, 16, DType::f32, block);
  for (const GptMemoryBudget* m : {&kept, &less, &input})
    EXPECT_STREQ(m->peak_at, m == &input ? "the last block's re-run MLP backward"
                                         : "the last block's MLP backward");
  // none keeps per layer 16 C in b (the GELU input's rows padded: 4 C = 32 is a multiple of 8)
  // and 4 + H = 6 fp32 statistics per token.
  const double layer = B * T * (b * 16 * C + 4 * 6);
  EXPECT_DOUBLE_EQ(kept.recompute_bytes, 0);
  EXPECT_DOUBLE_EQ(kept.activations_bytes - less.activations_bytes, L * b * B * T * 4 * C);
  EXPECT_DOUBLE_EQ(less.recompute_bytes, b * B * T * 4 * C);
  EXPECT_DOUBLE_EQ(kept.activations_bytes - input.activations_bytes,
                   L * (layer - b * B * T * 2 * C));
  EXPECT_DOUBLE_EQ(input.recompute_bytes, layer);
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
  EXPECT_DOUBLE_EQ(zero.master_bytes, 0);      // f32: the parameters are the masters
  EXPECT_DOUBLE_EQ(zero.activations_bytes, one_rank.activations_bytes);
  // bf16: the f32 masters are sharded too (4 N / 3); the bf16 weights stay whole (2 N).
  const GptMemoryBudget zero_bf16 =
      gpt_memory_budget(small_config(), 6, 4, DType::bf16, {.world = 3, .zero = 1});
  EXPECT_DOUBLE_EQ(zero_bf16.master_bytes, 4 * 656);
  EXPECT_DOUBLE_EQ(zero_bf16.adam_bytes, 8 * 656);
  EXPECT_DOUBLE_EQ(zero_bf16.parameters_bytes, 2 * 1968);
  EXPECT_DOUBLE_EQ(
      gpt_memory_budget(small_config(), 6, 4, DType::bf16, {.world = 3, .zero = 0}).master_bytes,
      4 * 1968);
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

}  // namespace
}  // namespace glass::train
