// `roofline step` as a user runs it: a training step planned on the meta device, its JSON fields
// present and consistent, the three GPUs' roofs, and bad input as one error line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_testing.h"

namespace {

using glass::testing::expect_one_line_error;
using glass::testing::run_sample;

#if defined(GLASS_HAS_EMU)  // meta plans with the emu kernel table

const std::string kSmallStep =
    "step --n-layer 2 --n-head 2 --n-embd 32 --vocab-size 96 --seq-len 32 --batch 2 ";

nlohmann::json step_json(const std::string& args) {
  const auto r = run_sample("roofline", args + " --json");
  EXPECT_EQ(r.status, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

TEST(RooflineStepCli, JsonFieldsAreConsistent) {
  const nlohmann::json j = step_json(kSmallStep + "--top 5");
  for (const char* field :
       {"gpu", "peaks", "dtype", "attention", "model_flops", "ideal_ms", "bound_ms",
        "tensor_core_flop_share", "launch_count", "units", "kernels", "top_launches", "memory"})
    EXPECT_TRUE(j.contains(field)) << field;
  EXPECT_EQ(j["gpu"], "h200");
  EXPECT_EQ(j["attention"], "flash");  // auto on cuda for head dim 16
  // ideal = model FLOPs / 989 TFLOP/s; the model's FLOPs (6 N' + 12 L T C) B T by hand.
  const double C = 32, L = 2, T = 32, V = 96;
  const double n_prime = V * C + L * (12 * C * C + 13 * C) + 2 * C;
  EXPECT_DOUBLE_EQ(j["model_flops"].get<double>(), (6 * n_prime + 12 * L * T * C) * 2 * T);
  EXPECT_NEAR(j["ideal_ms"].get<double>(), j["model_flops"].get<double>() / 989e12 * 1e3, 1e-12);
  const double bound = j["bound_ms"].get<double>();
  // --top 5 launches, largest bound first, each bounded by its unit's roof or the bandwidth; the
  // units' bounds add up to the step's.
  const auto& top = j["top_launches"];
  ASSERT_EQ(top.size(), 5u);
  for (size_t i = 1; i < top.size(); ++i)
    EXPECT_GE(top[i - 1]["bound_ms"].get<double>(), top[i]["bound_ms"].get<double>());
  for (const auto& l : top) {
    const double peak = l["unit"] == "tensor_core_bf16" ? 989e12 : 67e12;
    EXPECT_NEAR(l["bound_ms"].get<double>(),
                std::max(l["flops"].get<double>() / peak, l["bytes"].get<double>() / 4.8e12) * 1e3,
                1e-12)
        << l;
  }
  double units = 0;
  for (const auto& u : j["units"]) units += u["bound_ms"].get<double>();
  EXPECT_NEAR(units, bound, 1e-9 * bound);
  EXPECT_GT(j["tensor_core_flop_share"].get<double>(), 0);
  EXPECT_LT(j["tensor_core_flop_share"].get<double>(), 1);
  EXPECT_GT(j["memory"]["peak_allocated_bytes"].get<double>(),
            j["memory"]["state_bytes"].get<double>());
}

// The same step's launches against three GPUs' roofs: H100 and H200 share their compute roofs
// and differ in bandwidth; the A100's bf16 roof is 312 TFLOP/s.
TEST(RooflineStepCli, ThreeGpus) {
  const nlohmann::json h200 = step_json(kSmallStep + "--gpu h200");
  const nlohmann::json h100 = step_json(kSmallStep + "--gpu h100");
  const nlohmann::json a100 = step_json(kSmallStep + "--gpu a100");
  EXPECT_EQ(h100["ideal_ms"], h200["ideal_ms"]);
  EXPECT_GT(h100["bound_ms"].get<double>(), h200["bound_ms"].get<double>());  // less bandwidth
  EXPECT_NEAR(a100["ideal_ms"].get<double>() / h200["ideal_ms"].get<double>(), 989.0 / 312.0, 1e-9);
  EXPECT_EQ(a100["launch_count"], h200["launch_count"]);
  EXPECT_EQ(a100["peaks"]["source"], "NVIDIA A100 SXM4 80GB datasheet");
}

TEST(RooflineStepCli, TablesAndErrors) {
  const auto r = run_sample("roofline", kSmallStep + "--attention naive");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* text :
       {"by kernel", "by unit", "top 10 launches by bound", "ideal_ms", "bound_ms",
        "tensor_core_flop_share", "attention_forward", "NVIDIA H200 SXM datasheet"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " in:\n" << r.out;
  expect_one_line_error("roofline", kSmallStep + "--gpu tpu", "--gpu 'tpu': unknown");
  expect_one_line_error("roofline", kSmallStep + "--attention cudnn", "cuda only");
  expect_one_line_error("roofline", kSmallStep + "--attention sideways",
                        "unknown attention kernel 'sideways'");
  expect_one_line_error("roofline", "step --model gpt2 --n-embd 64", "drop --n-embd");
}

#endif

}  // namespace
