// A training step of a tiny GPT runs every residual add that a LayerNorm reads fused with that
// LayerNorm (residual_layer_norm): in forward, no standalone add on the residual stream and one
// plain layernorm_forward (block 0's ln_1, which has no add before it); in backward, the fused
// backward wherever both outputs get a gradient (the last block's sum is read by ln_f only, so that
// one is a plain LayerNorm backward), and no gradient sums on the residual stream. On cpu, and on
// emu in f32 and bf16. Before the fusion, forward launched 2 adds and 2 layernorm_forward per
// block, so this fails without it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/testing.h"
#include "tests/train/train_testing.h"

namespace glass {
namespace {

// The launches of one training step with n_layer blocks (dropout off: the fused attention path).
std::vector<LaunchRecord> step_launches(const std::string& device, const std::string& dtype,
                                        int64_t n_layer) {
  train::TrainOptions o = testing::tiny_options();
  o.device = device;
  o.dtype = dtype;
  o.n_layer = n_layer;
  o.dropout = 0;
  o.steps = 1;
  train::Trainer trainer(o);
  testing::LaunchLog log;
  trainer.train_step();
  return log.records;
}

std::vector<std::string> kernels(const std::vector<LaunchRecord>& launches, Phase phase) {
  std::vector<std::string> names;
  for (const LaunchRecord& r : launches)
    if (r.info.phase == phase) names.emplace_back(r.info.kernel);
  return names;
}

int count_op(const std::vector<LaunchRecord>& launches, Phase phase, const std::string& op) {
  return static_cast<int>(std::count_if(launches.begin(), launches.end(), [&](const auto& r) {
    return r.info.phase == phase && op == r.info.op;
  }));
}

void expect_fused_residual_layernorm_step(const std::string& device, const std::string& dtype) {
  SCOPED_TRACE(device + " " + dtype);
  const int layers = 2;
  const std::vector<LaunchRecord> step = step_launches(device, dtype, layers);
  const std::vector<std::string> forward = kernels(step, Phase::forward),
                                 backward = kernels(step, Phase::backward);
  EXPECT_EQ(testing::count_of(forward, "layernorm_forward"), 1);
  EXPECT_EQ(testing::count_of(forward, "residual_layernorm_forward"), 2 * layers);
  // The only add left in forward is the embeddings' (token + position).
  EXPECT_EQ(count_op(step, Phase::forward, "add"), 1);
  EXPECT_EQ(testing::count_of(backward, "residual_layernorm_backward"), 2 * layers - 1);
  EXPECT_EQ(testing::count_of(backward, "layernorm_backward"), 2);  // block 0's ln_1 and ln_f
  // Each residual sum has one reader (the next fused op), which adds its LayerNorm's gradient into
  // the stream's gradient itself. So one more block adds no gradient sum to those backward()
  // launches (op grad_accumulate): its 12 parameters' gradients are fresh tensors, which become
  // their .grad without a launch (autograd/backward.cpp). Unfused it added two: each of its
  // residual sums had two readers.
  const std::vector<LaunchRecord> one_block = step_launches(device, dtype, 1);
  EXPECT_EQ(count_op(step, Phase::backward, "grad_accumulate") -
                count_op(one_block, Phase::backward, "grad_accumulate"),
            0);
}

TEST(FusedResidualLayerNorm, TrainingStepOnCpuRunsTheFusedOp) {
  expect_fused_residual_layernorm_step("cpu", "f32");
}

TEST(FusedResidualLayerNorm, TrainingStepOnEmuRunsTheFusedOpInF32AndBf16) {
  expect_fused_residual_layernorm_step("emu", "f32");
  expect_fused_residual_layernorm_step("emu", "bf16");
}

}  // namespace
}  // namespace glass
