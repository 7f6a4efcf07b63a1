// --on-nonfinite: a NaN in one gradient at step k never reaches the weights, the AdamW moments or
// a checkpoint. `skip` drops the step and marks it; `stop` ends the run naming the step, and for a
// NaN made by an op, the first node that produced it (the anomaly re-run, autograd/anomaly.h).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/ops.h"
#include "train/checkpoint.h"
#include "train_testing.h"

namespace glass::train {
namespace {

using State = std::vector<std::vector<float>>;

// The weights and the optimizer's buffers (exp_avg, exp_avg_sq), in a fixed order.
State weights_and_moments(const Trainer& t) {
  State s;
  for (const auto& [name, p] : t.model().named_parameters()) s.push_back(to_vector<float>(p));
  for (const auto& [name, b] : t.optimizer().state_tensors()) s.push_back(to_vector<float>(b));
  return s;
}

bool all_finite(const State& s) {
  for (const auto& v : s)
    for (float x : v)
      if (!std::isfinite(x)) return false;
  return true;
}

void expect_checkpoint_finite(const std::string& where) {
  const LoadedCheckpoint ck = load_checkpoint(where);
  for (const NamedTensors* group : {&ck.model, &ck.optimizer})
    for (const auto& [name, t] : *group)
      for (float x : to_vector<float>(t)) ASSERT_TRUE(std::isfinite(x)) << where << ": " << name;
}

TEST(NonFinite, SkipLeavesWeightsAndMomentsUntouchedAndMarksTheStep) {
  const std::string dir = testing::temp_dir("nonfinite_skip");
  TrainOptions o = testing::tiny_options();
  o.steps = 4;
  o.on_nonfinite = "skip";
  o.metrics = dir + "/metrics.jsonl";
  o.checkpoint_dir = dir;
  o.checkpoint_every = 1;
  Trainer t(o);
  testing::inject_nan_at_step(t, 2);
  EXPECT_FALSE(t.train_step().skipped);
  const State after_step1 = weights_and_moments(t);
  const StepResult r2 = t.train_step();
  EXPECT_TRUE(r2.skipped);
  EXPECT_FALSE(std::isfinite(r2.grad_norm));
  // Bit for bit what step 1 left: neither the weights nor the moments saw the NaN.
  EXPECT_EQ(weights_and_moments(t), after_step1);
  EXPECT_EQ(t.skipped_steps(), std::vector<int64_t>{2});
  // The run carries on from there and updates again.
  t.run();
  EXPECT_EQ(t.step(), 4);
  EXPECT_NE(weights_and_moments(t), after_step1);
  EXPECT_TRUE(all_finite(weights_and_moments(t)));
  expect_checkpoint_finite(dir);
  // Only step 2 is marked, in the metrics that run() wrote (steps 3 and 4).
  std::ifstream in(o.metrics);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    EXPECT_FALSE(j.at("skipped").get<bool>()) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 2);
}

TEST(NonFinite, SkippedStepIsMarkedInTheMetrics) {
  const std::string dir = testing::temp_dir("nonfinite_metrics");
  TrainOptions o = testing::tiny_options();
  o.steps = 3;
  o.on_nonfinite = "skip";
  o.metrics = dir + "/metrics.jsonl";
  Trainer t(o);
  testing::inject_nan_at_step(t, 2);
  t.run();
  std::ifstream in(o.metrics);
  std::vector<bool> skipped;
  for (std::string line; std::getline(in, line);)
    skipped.push_back(nlohmann::json::parse(line).at("skipped").get<bool>());
  EXPECT_EQ(skipped, (std::vector<bool>{false, true, false}));
}

TEST(NonFinite, StopNamesTheStepAndWritesNoNonFiniteCheckpoint) {
  const std::string dir = testing::temp_dir("nonfinite_stop");
  TrainOptions o = testing::tiny_options();
  o.steps = 4;
  // on_nonfinite defaults to stop; the NaN goes in at step 3 (below).
  // Without dropout: attention with dropout is built from plain ops whose causal mask holds -inf,
  // which anomaly mode reports as the first non-finite value (engine/debug.h's GLASS_CHECK_NAN).
  o.dropout = 0;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 1;
  Trainer t(o);
  testing::inject_nan_at_step(t, 3);
  try {
    t.run();
    FAIL() << "a NaN gradient did not stop the run";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 3: non-finite gradients"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the weights were not updated"), std::string::npos) << msg;
    // The NaN was put into a gradient after backward: the re-run finds no op that made it.
    EXPECT_NE(msg.find("found no op that produced it"), std::string::npos) << msg;
  }
  EXPECT_TRUE(all_finite(weights_and_moments(t)));
  // The last checkpoint is step 2's, and it is finite.
  EXPECT_EQ(load_checkpoint(dir).state.step, 2);
  expect_checkpoint_finite(dir);
}

TEST(NonFinite, StopNamesTheFirstNodeThatProducedIt) {
  TrainOptions o = testing::tiny_options();
  o.device = "cpu";
  o.steps = 2;
  Trainer t(o);
  // A NaN in one weight of the first block's attention projection: forward's linear through it is
  // the first op whose output is non-finite.
  for (const auto& [name, p] : t.model().named_parameters())
    if (name == "transformer.h.0.attn.c_attn.weight") p.data<float>()[5] = NAN;
  try {
    t.train_step();
    FAIL() << "a NaN weight did not stop the step";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 1: non-finite loss"), std::string::npos) << msg;
    EXPECT_NE(msg.find("First produced by: GLASS_CHECK_NAN: node #"), std::string::npos) << msg;
    EXPECT_NE(msg.find("created at"), std::string::npos) << msg;
  }
  EXPECT_EQ(t.step(), 0);
}

TEST(NonFinite, UnknownPolicyIsRefused) {
  TrainOptions o = testing::tiny_options();
  o.on_nonfinite = "ignore";
  EXPECT_THROW(Trainer{o}, Error);
}

}  // namespace
}  // namespace glass::train
