// profile_op and roofline as a user runs them: profile_op writes JSON with every field on cpu and
// emu (and a trace), roofline reproduces the course's numbers, and bad input is one error line.
// profile_op's and debug_step's step explorer: each tape node's gradient norm against gradients
// worked out here on the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "cli_testing.h"
#include "tests/train/report_testing.h"

namespace {

using glass::testing::expect_one_line_error;
using glass::testing::Outcome;
using glass::testing::run_sample;
using glass::testing::scratch_path;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void expect_profile_of_mlp(const std::string& device) {
  const std::string out = scratch_path(device + "_mlp.json");
  const std::string trace = scratch_path(device + "_mlp_trace.json");
  const auto r = run_sample("profile_op", "--device " + device +
                                              " --operation mlp --shape 33,24 --warmup 1 "
                                              "--repeats 3 --threads 2 --output " +
                                              out + " --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = read_json(out);
  for (const char* field :
       {"device", "device_name", "engine_version", "operation", "dtype", "shapes", "clock",
        "median_ms", "min_ms", "profiled_ms", "profiler_overhead", "peak_allocated_bytes",
        "peak_reserved_bytes", "kernels", "peaks", "gradients_finite"})
    EXPECT_TRUE(j.contains(field)) << field;
  EXPECT_EQ(j["device"], device);
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["shapes"]["x"], nlohmann::json({33, 24}));
  EXPECT_EQ(j["shapes"]["c_fc.weight"], nlohmann::json({96, 24}));
  EXPECT_TRUE(j["gradients_finite"].get<bool>());
  EXPECT_GT(j["median_ms"].get<double>(), 0);
  EXPECT_GE(j["peak_reserved_bytes"].get<int64_t>(), j["peak_allocated_bytes"].get<int64_t>());
  EXPECT_GT(j["peak_allocated_bytes"].get<int64_t>(), 0);
  // A host clock is never called GPU time.
  EXPECT_NE(j["clock"].get<std::string>().find("host"), std::string::npos);
  ASSERT_GE(j["kernels"].size(), 3u);  // at least the GEMMs, GELU and its backward
  for (const auto& k : j["kernels"]) {
    for (const char* f : {"kernel", "calls", "self_ms", "total_ms", "bound"})
      EXPECT_TRUE(k.contains(f)) << f;
    EXPECT_LE(k["self_ms"].get<double>(), k["total_ms"].get<double>() + 1e-9);
  }
  EXPECT_FALSE(read_json(trace).at("traceEvents").empty());
}

TEST(ProfileOpCli, MlpOnCpu) { expect_profile_of_mlp("cpu"); }
TEST(ProfileOpCli, MlpOnEmu) { expect_profile_of_mlp("emu"); }

TEST(ProfileOpCli, BadInputIsOneLine) {
  const std::string out = " --output " + scratch_path("bad.json");
  expect_one_line_error("profile_op", "--operation conv" + out, "unknown operation 'conv'");
  expect_one_line_error("profile_op", "--operation matmul --shape 3,4" + out, "M,K,N");
  expect_one_line_error("profile_op", "--shape 3,x,4" + out, "--shape '3,x,4'");
  expect_one_line_error("profile_op", "--device tpu" + out, "tpu");
  expect_one_line_error("profile_op", "--device cpu", "--output");
}

// emu's bf16 kernels profile like its f32 ones; their math is f32 on the host, so they are judged
// against the host's f32 peak, and the JSON says which peak that is.
TEST(ProfileOpCli, Bf16OnEmuIsJudgedAgainstTheHostsF32Peak) {
  for (const std::string op :
       {"softmax --shape 8,64", "matmul --shape 8,16,24", "mlp --shape 4,8"}) {
    SCOPED_TRACE(op);
    const std::string out = scratch_path("bf16.json");
    const Outcome r = run_sample("profile_op",
                                 "--device emu --dtype bf16 --warmup 0 --repeats 1 "
                                 "--threads 2 --operation " +
                                     op + " --output " + out);
    ASSERT_EQ(r.status, 0) << r.out;
    const nlohmann::json j = read_json(out);
    EXPECT_EQ(j["dtype"], "bf16");
    EXPECT_EQ(j["peak_dtype"], "f32");
    EXPECT_TRUE(j["gradients_finite"].get<bool>());
    EXPECT_FALSE(j["kernels"].empty());
  }
}

// The attention operation times forward + backward of the kernel --attention names: flash-mma's
// three launches (bf16 on emu) with their FLOPs, and one line for a kernel that cannot run.
TEST(ProfileOpCli, AttentionTimesTheChosenKernel) {
  const std::string out = scratch_path("attention.json");
  const Outcome r = run_sample("profile_op",
                               "--device emu --dtype bf16 --warmup 0 --repeats 1 --threads 2 "
                               "--operation attention --attention flash-mma --shape 1,2,20,32 "
                               "--output " +
                                   out);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = read_json(out);
  EXPECT_EQ(j["attention"], "flash-mma");
  std::vector<std::string> kernels;
  for (const auto& k : j["kernels"]) kernels.push_back(k["kernel"]);
  for (const char* name : {"flash_attention_forward_mma", "flash_attention_backward_mma_query",
                           "flash_attention_backward_mma_key"})
    EXPECT_NE(std::find(kernels.begin(), kernels.end(), name), kernels.end()) << name;
  EXPECT_TRUE(j["gradients_finite"].get<bool>());
  expect_one_line_error("profile_op",
                        "--device emu --operation attention --attention flash-mma --shape "
                        "1,2,20,32 --output " +
                            out,
                        "flash-mma attention runs in bf16 only, not f32");
}

// --help gives each default, and a --shape for every operation, those of --variant included.
TEST(ProfileOpCli, HelpShowsDefaultsAndEveryShape) {
  const Outcome r = run_sample("profile_op", "--help");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* text : {"layernorm rows, cols", "rmsnorm rows, cols", "attention B, H, T, D",
                           "matmul M,K,N", "(e.g. smem)", "TEXT=cpu", "TEXT=matmul", "INT=10"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " in:\n" << r.out;
  EXPECT_EQ(r.out.find("; \n"), std::string::npos) << r.out;
}

// GLASS_KERNEL_VARIANT is parsed on cpu as on emu: a bad value is the same error, not ignored.
TEST(ProfileOpCli, ABadKernelVariantFailsOnCpuAsOnEmu) {
  const std::string args = "--operation softmax --shape 4,8 --warmup 0 --repeats 1 --output " +
                           scratch_path("variant.json");
  for (const std::string device : {"cpu", "emu"}) {
    const Outcome r = glass::testing::run_command(
        "GLASS_KERNEL_VARIANT=softmax:7 " + std::string(GLASS_BINARY_DIR) +
        "/samples/profile_op --device " + device + " " + args);
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("GLASS_KERNEL_VARIANT=softmax:7"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("softmax has no rung '7'"), std::string::npos) << r.out;
  }
  const Outcome ok = glass::testing::run_command("GLASS_KERNEL_VARIANT=softmax:1 " +
                                                 std::string(GLASS_BINARY_DIR) +
                                                 "/samples/profile_op --device cpu " + args);
  EXPECT_EQ(ok.status, 0) << ok.out;
}

// --variant all: one row per rung of the kernel ladder, each checked against the launches' FLOPs
// and bytes (time and fraction positive; the production rung marked).
TEST(ProfileOpCli, VariantTableOnEmu) {
  const std::string json = scratch_path("ladder.json");
  const Outcome r = run_sample("profile_op",
                               "--device emu --operation softmax --variant all "
                               "--shape 37,45 --repeats 2 --output " +
                                   json);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("roofline fraction"), std::string::npos) << r.out;
  const nlohmann::json rows = read_json(json);
  ASSERT_EQ(rows.size(), 4u);
  int production = 0;
  for (const auto& row : rows) {
    EXPECT_GT(row["median_us"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(row["bytes"].get<double>(), 2.0 * 37 * 45 * 4);  // read x, write y
    EXPECT_GT(row["roofline_fraction"].get<double>(), 0);
    production += row["production"].get<bool>();
  }
  EXPECT_EQ(production, 1);
  const Outcome one = run_sample("profile_op",
                                 "--device emu --operation matmul --variant 1 "
                                 "--shape 5,7,9 --repeats 1 --output " +
                                     json);
  ASSERT_EQ(one.status, 0) << one.out;
  const nlohmann::json only = read_json(json);
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only[0]["rung"].get<int>(), 1);
  EXPECT_DOUBLE_EQ(only[0]["flops"].get<double>(), 2.0 * 5 * 7 * 9);
  // --dtype bf16: matmul's rungs that take bf16, cuBLAS and the Tensor Core rung, whose launches
  // name the Tensor Cores as their unit
  const Outcome bf16 = run_sample("profile_op",
                                  "--device emu --operation matmul --variant all --dtype bf16 "
                                  "--shape 5,7,9 --repeats 1 --output " +
                                      json);
  ASSERT_EQ(bf16.status, 0) << bf16.out;
  const nlohmann::json bf16_rows = read_json(json);
  ASSERT_EQ(bf16_rows.size(), 2u);
  EXPECT_EQ(bf16_rows[0]["name"], "cublas");
  EXPECT_EQ(bf16_rows[1]["name"], "tensor_core");
  EXPECT_EQ(bf16_rows[1]["compute_unit"], "tensor_core_bf16");
  EXPECT_EQ(bf16_rows[1]["dtype"], "bf16");
  const std::string out = " --output " + scratch_path("bad_ladder.json");
  expect_one_line_error("profile_op",
                        "--device emu --operation matmul --variant 0 --dtype bf16" + out,
                        "takes f32 operands only");
  expect_one_line_error("profile_op", "--device cpu --operation softmax --variant all" + out,
                        "--device emu");
  expect_one_line_error("profile_op", "--device emu --operation softmax --variant 9" + out,
                        "no rung '9'");
  expect_one_line_error("profile_op", "--device emu --operation mlp --variant all" + out, "mlp");
}

// The line of `out` that contains `label` ("" if none).
std::string line_of(const std::string& out, const std::string& label) {
  const size_t at = out.find(label);
  if (at == std::string::npos) return "";
  const size_t start = out.rfind('\n', at) + 1;  // npos + 1 == 0 on the first line
  return out.substr(start, out.find('\n', at) - start);
}

TEST(RooflineCli, CourseGemmExample) {
  const auto small = run_sample("roofline", "gemm --m 32 --k 4096 --n 4096 --dtype bf16");
  ASSERT_EQ(small.status, 0) << small.out;
  EXPECT_NE(small.out.find("= 31.51 FLOP/byte"), std::string::npos) << small.out;
  EXPECT_NE(small.out.find("bound       memory"), std::string::npos) << small.out;
  const auto big = run_sample("roofline", "gemm --m 2048 --k 4096 --n 4096 --device h100");
  ASSERT_EQ(big.status, 0) << big.out;
  EXPECT_NE(big.out.find("= 1024 FLOP/byte"), std::string::npos) << big.out;
  EXPECT_NE(big.out.find("bound       compute"), std::string::npos) << big.out;
}

TEST(RooflineCli, ElementwiseAndGpt) {
  const auto e = run_sample("roofline", "elementwise --n 1000 --dtype f32 --device a100");
  ASSERT_EQ(e.status, 0) << e.out;
  EXPECT_NE(e.out.find("= 12 KB"), std::string::npos) << e.out;  // 4 * 1000 * (2 + 1)
  // The hand-computed config of tests/train (GptCost.MemoryBudgetByHand): 1968 parameters.
  const auto g = run_sample("roofline",
                            "gpt --n-layer 2 --n-head 2 --n-embd 8 --vocab-size 10 --block-size 16 "
                            "--seq-len 4 --batch 2 --dtype bf16");
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_NE(g.out.find("N = 1968 parameters"), std::string::npos) << g.out;
  EXPECT_NE(line_of(g.out, "fp32 master weights").find(" 7872 B"), std::string::npos) << g.out;
  // tests/train's hand count (87040 B: the peak at the first block's MLP backward), with the
  // GPU's 32 MiB GEMM workspace.
  EXPECT_NE(line_of(g.out, "  total").find(" 33641472 B"), std::string::npos) << g.out;
}

// The GPT-2 124M preset: llm.c's parameter count (padded vocabulary) and the fast path's budget.
TEST(RooflineCli, Gpt2Preset) {
  const auto g = run_sample("roofline", "gpt --model gpt2 --dtype bf16 --batch 8");
  ASSERT_EQ(g.status, 0) << g.out;
  EXPECT_NE(g.out.find("N = 124475904 parameters"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("padded_vocab_size=50304"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("flash attention: LSE, no T x T"), std::string::npos) << g.out;
  EXPECT_NE(g.out.find("total"), std::string::npos) << g.out;
  expect_one_line_error("roofline", "gpt --model gpt2 --n-layer 3", "drop --n-layer");
}

// `roofline model` for llama shapes: llama2.c's stories15M count (15,191,712 with its 32000-token
// vocabulary), GQA's smaller projections, and the mixture of experts on paper: active vs resident
// parameters by the formulas of train/gpt_cost.h worked by hand here.
TEST(RooflineCli, LlamaAndMixtureOfExperts) {
  const auto s = run_sample("roofline", "model --model stories15m --batch 4");
  ASSERT_EQ(s.status, 0) << s.out;
  EXPECT_NE(s.out.find("N = 15191712 parameters"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("arch=llama"), std::string::npos) << s.out;
  // L=2 C=64 H=4 Hkv=2 D=16 F=128 V=100 tied: per block the norms 128 + qkv_proj (4 + 2*2)*16*64
  // = 8192 + o_proj 4096 + gate_up and down 3*128*64 = 24576, 36992 in all;
  // N = 100*64 + 2*36992 + 64 = 80448; one expert 24576, a router 4*64 = 256 per layer.
  const auto m = run_sample("roofline",
                            "model --arch llama --n-layer 2 --n-head 4 --n-kv-head 2 --n-embd 64 "
                            "--ffn-hidden 128 --vocab-size 100 --seq-len 32 --batch 2 "
                            "--n-expert 4 --top-k 2");
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_NE(m.out.find("N = 80448 parameters"), std::string::npos) << m.out;
  // active = 80448 + 2 (24576 + 256) = 130112; resident = 80448 + 2 (3*24576 + 256) = 228416.
  const std::string table = line_of(m.out, "130112");
  EXPECT_NE(table.find("80448"), std::string::npos) << m.out;
  EXPECT_NE(table.find("228416"), std::string::npos) << m.out;
  expect_one_line_error("roofline", "model --arch llama --n-head 4 --n-kv-head 3 --n-embd 64",
                        "n_kv_head 3 must divide n_head 4");
  expect_one_line_error("roofline", "model --model llama-tiny --n-kv-head 2", "drop --n-kv-head");
  expect_one_line_error("roofline", "model --arch llama --n-expert 4 --top-k 5", "--top-k 5");
}

// cpu has f32 kernels and an f32 peak only: --dtype defaults to f32 there, in every subcommand,
// and an explicit bf16 is one short line that says what to use.
TEST(RooflineCli, CpuDefaultsToF32) {
  for (const std::string cmd : {"gemm --m 64 --k 64 --n 64", "elementwise --n 1000",
                                "attention --batch 1 --heads 2 --seq-len 16 --head-dim 8",
                                "gpt --n-layer 1 --n-head 2 --n-embd 16 --vocab-size 65 "
                                "--seq-len 8 --batch 2"}) {
    SCOPED_TRACE(cmd);
    const Outcome r = run_sample("roofline", cmd + " --device cpu");
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("f32"), std::string::npos) << r.out;
    const Outcome bf16 = run_sample("roofline", cmd + " --device cpu --dtype bf16");
    expect_one_line_error("roofline", cmd + " --device cpu --dtype bf16", "use --dtype f32");
    EXPECT_LT(bf16.out.size(), 140u) << bf16.out;
  }
  const Outcome help = run_sample("roofline", "gemm --help");
  EXPECT_EQ(help.status, 0) << help.out;
  EXPECT_NE(help.out.find("TEXT=h200"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("INT=0 REQUIRED"), std::string::npos) << help.out;  // --m: no default
  EXPECT_NE(help.out.find("default: f32 on cpu, else bf16"), std::string::npos) << help.out;
}

TEST(RooflineCli, BadInputIsOneLine) {
  expect_one_line_error("roofline", "gemm --m 32 --k 4 --n 4 --device h300", "h300");
  expect_one_line_error("roofline", "gemm --m 0 --k 4 --n 4", "M=0");
  expect_one_line_error("roofline", "gemm --m 32 --k 4 --n 4 --dtype f16", "f16");
  expect_one_line_error("roofline", "gpt --n-head 5", "n_head");
  expect_one_line_error("roofline", "", "subcommand");
}

const std::string kTinyTrain = "--data " + std::string(GLASS_SOURCE_DIR) +
                               "/data/tinyshakespeare.txt --n-layer 1 --n-head 2 --n-embd 16 "
                               "--seq-len 8 --batch 2 --sample 0 --eval-every 0 --threads 1 ";

TEST(TrainGptProfilingCli, StepLinesCarryMfuAndMemoryAndTheFormulaIsPrinted) {
  const std::string trace = scratch_path("cli_trace.json");
  const auto r = run_sample("train_gpt", kTinyTrain + "--steps 2 --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("FLOPs per token = 6 N + 12 L T C"), std::string::npos) << r.out;
  int step_lines = 0;
  for (const std::string label : {"step     1/2", "step     2/2"}) {
    const std::string line = line_of(r.out, label);
    step_lines += !line.empty();
    EXPECT_NE(line.find("| MFU "), std::string::npos) << line;
    EXPECT_NE(line.find("| peak mem "), std::string::npos) << line;
  }
  EXPECT_EQ(step_lines, 2) << r.out;
  EXPECT_NE(r.out.find("kernels of steps 2..2"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(trace));
}

TEST(TrainGptProfilingCli, BadProfileStepsIsOneLine) {
  expect_one_line_error("train_gpt", kTinyTrain + "--steps 2 --trace t.json --profile-steps 1:3",
                        "--profile-steps 1:3");
  expect_one_line_error("train_gpt", kTinyTrain + "--steps 2 --profile-steps 1:2",
                        "needs --trace or --report");
}

// profile_op and debug_step write the step explorer too (debug_step with its tape); a report path
// in a missing directory is one line, before any work.
TEST(ExplorerCli, ProfileOpAndDebugStepWriteTheExplorer) {
  const std::string op_report = scratch_path("op_explorer.html");
  const std::string step_report = scratch_path("step_explorer.html");
  std::filesystem::remove(op_report);
  std::filesystem::remove(step_report);
  const Outcome op = run_sample("profile_op",
                                "--device cpu --operation mlp --shape 8,16 --warmup 0 --repeats 1 "
                                "--threads 1 --output " +
                                    scratch_path("op.json") + " --report " + op_report);
  ASSERT_EQ(op.status, 0) << op.out;
  const std::string op_html = glass::testing::file_bytes(op_report);
  EXPECT_NE(op_html.find("id=\"glass-data\""), std::string::npos);
  EXPECT_NE(op_html.find("\"launches\":[{"), std::string::npos);
  const Outcome step = run_sample("debug_step", "--device cpu --report " + step_report);
  ASSERT_EQ(step.status, 0) << step.out;
  const std::string step_html = glass::testing::file_bytes(step_report);
  EXPECT_NE(step_html.find("\"tape\":[{"), std::string::npos);
  EXPECT_NE(step_html.find("\"module\":\"net.ln\""), std::string::npos);
  expect_one_line_error(
      "profile_op",
      "--device cpu --output " + scratch_path("op.json") + " --report /nonexistent/dir/r.html",
      "--report /nonexistent/dir/r.html: directory '/nonexistent/dir' does not "
      "exist");
  expect_one_line_error("debug_step", "--report /nonexistent/dir/r.html",
                        "--report /nonexistent/dir/r.html: directory '/nonexistent/dir' does not "
                        "exist");
}

// The tape of a pass's report: every node with its gradient norm, and none of the norm pass's
// launches (op grad_norm) in the shown pass's timeline. Returns norm by op (the last of each op).
std::map<std::string, double> norms_of_report(const std::string& path) {
  const nlohmann::json d = glass::testing::report_json(glass::testing::file_bytes(path));
  std::map<std::string, double> norms;
  EXPECT_FALSE(d["tape"].empty());
  for (const auto& n : d["tape"]) {
    EXPECT_TRUE(n["grad_norm"].is_number()) << n;
    if (n["grad_norm"].is_number()) norms[n["op"]] = n["grad_norm"];
  }
  for (const auto& l : d["launches"]) EXPECT_NE(l["op"], "grad_norm") << l;
  return norms;
}

double l2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

std::vector<double> host_values(const glass::Tensor& t) {
  const std::vector<float> f = glass::to_vector<float>(t);
  return {f.begin(), f.end()};
}

// debug_step --report: loss = sum(p * w), p = softmax(LayerNorm(x)) row by row (weight 1, bias 0),
// x and w [6, 40] ~ N(0, 1) from Generator(1) as debug_step draws them. By hand: d loss / d loss
// = 1, d loss / d(p * w) = ones, d loss / d p = w, d loss / d LayerNorm(x) = p (w - sum_j p_j w_j)
// in each row.
TEST(ExplorerCli, DebugStepReportHasEveryNodesGradientNormByHand) {
  const std::string report = scratch_path("step_norms.html");
  std::filesystem::remove(report);
  const Outcome r = run_sample("debug_step", "--device cpu --report " + report);
  ASSERT_EQ(r.status, 0) << r.out;
  const std::map<std::string, double> norms = norms_of_report(report);
  ASSERT_EQ(norms.size(), 4u);  // layernorm, softmax, mul, sum
  glass::Generator gen(1);
  const int64_t rows = 6, cols = 40;
  const std::vector<double> x = host_values(glass::randn({rows, cols}, gen));
  const std::vector<double> w = host_values(glass::randn({rows, cols}, gen));
  std::vector<double> dy;
  for (int64_t i = 0; i < rows; ++i) {
    const double* xr = &x[i * cols];
    const double* wr = &w[i * cols];
    double mean = 0, var = 0;
    for (int64_t j = 0; j < cols; ++j) mean += xr[j] / cols;
    for (int64_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean) / cols;
    std::vector<double> p(cols);
    double denom = 0, pw = 0;
    for (int64_t j = 0; j < cols; ++j)
      denom += p[j] = std::exp((xr[j] - mean) / std::sqrt(var + 1e-5));
    for (int64_t j = 0; j < cols; ++j) pw += (p[j] /= denom) * wr[j];
    for (int64_t j = 0; j < cols; ++j) dy.push_back(p[j] * (wr[j] - pw));
  }
  EXPECT_NEAR(norms.at("sum"), 1.0, 1e-12);
  EXPECT_NEAR(norms.at("mul"), std::sqrt(double(rows * cols)), 1e-5);
  EXPECT_NEAR(norms.at("softmax"), l2(w), 1e-5 * l2(w));
  EXPECT_NEAR(norms.at("layernorm"), l2(dy), 1e-4 * l2(dy));
}

// profile_op --report: backward starts from a random u = d loss / d out (the loss sum(out * u)).
// The GPT MLP out = c_proj(gelu(h)), h = c_fc(x), on x [8, 16] with the leaves and u drawn from
// Generator(1234) in profile_op's order. By hand: |d/d out| = |u|, d/d gelu(h) = u c_proj.weight,
// d/d h = (u c_proj.weight) gelu'(h) with GELU's tanh form.
TEST(ExplorerCli, ProfileOpReportHasEveryNodesGradientNormByHand) {
  const std::string report = scratch_path("op_norms.html");
  std::filesystem::remove(report);
  const int64_t T = 8, C = 16, H = 4 * C;
  const Outcome r = run_sample("profile_op",
                               "--device cpu --operation mlp --shape 8,16 --warmup 0 --repeats 1 "
                               "--threads 1 --output " +
                                   scratch_path("op_norms.json") + " --report " + report);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json d = glass::testing::report_json(glass::testing::file_bytes(report));
  ASSERT_EQ(d["tape"].size(), 3u);  // linear, gelu, linear
  norms_of_report(report);          // a norm on every node, no norm launch in the timeline
  glass::Generator gen(1234);
  const std::vector<double> x = host_values(glass::randn({T, C}, gen));
  const std::vector<double> w_fc = host_values(glass::randn({H, C}, gen));
  const std::vector<double> b_fc = host_values(glass::randn({H}, gen));
  const std::vector<double> w_proj = host_values(glass::randn({C, H}, gen));
  host_values(glass::randn({C}, gen));  // c_proj.bias: no part in any gradient here
  const std::vector<double> u = host_values(glass::randn({T, C}, gen));
  std::vector<double> d_gelu(T * H), d_h(T * H);
  const double k = std::sqrt(2 / M_PI);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < H; ++j) {
      double h = b_fc[j], g = 0;
      for (int64_t c = 0; c < C; ++c) {
        h += x[t * C + c] * w_fc[j * C + c];
        g += u[t * C + c] * w_proj[c * H + j];
      }
      const double th = std::tanh(k * (h + 0.044715 * h * h * h));
      d_gelu[t * H + j] = g;
      d_h[t * H + j] =
          g * (0.5 * (1 + th) + 0.5 * h * (1 - th * th) * k * (1 + 3 * 0.044715 * h * h));
    }
  const nlohmann::json& tape = d["tape"];
  EXPECT_EQ(tape[0]["op"], "linear");
  EXPECT_EQ(tape[1]["op"], "gelu");
  EXPECT_EQ(tape[2]["op"], "linear");
  EXPECT_NEAR(tape[2]["grad_norm"].get<double>(), l2(u), 1e-5 * l2(u));
  EXPECT_NEAR(tape[1]["grad_norm"].get<double>(), l2(d_gelu), 1e-5 * l2(d_gelu));
  EXPECT_NEAR(tape[0]["grad_norm"].get<double>(), l2(d_h), 1e-4 * l2(d_h));
}

}  // namespace
