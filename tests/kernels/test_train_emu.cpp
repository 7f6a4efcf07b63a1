// `train_gpt --device emu`: a few training steps of a tiny GPT on emu match the same steps on cpu.
// Everything runs on the device: weight init (Philox), forward, backward, clipping, AdamW. The
// kernels differ (kernels/cuda vs kernels/cpu), so the losses agree to float tolerance only.
#include <gtest/gtest.h>

#include <vector>

#include "tests/train/train_testing.h"

namespace glass {
namespace {

struct Trace {
  std::vector<double> loss, grad_norm;
};

Trace train(const std::string& device, double dropout) {
  train::TrainOptions o = testing::tiny_options();
  o.device = device;
  o.dropout = dropout;
  o.steps = 3;
  train::Trainer trainer(o);
  Trace t;
  for (int i = 0; i < o.steps; ++i) {
    const train::StepResult r = trainer.train_step();
    t.loss.push_back(r.loss);
    t.grad_norm.push_back(r.grad_norm);
  }
  return t;
}

void expect_same_training(double dropout) {
  const Trace cpu = train("cpu", dropout), emu = train("emu", dropout);
  for (size_t i = 0; i < cpu.loss.size(); ++i) {
    EXPECT_NEAR(emu.loss[i], cpu.loss[i], 1e-4 * cpu.loss[i]) << "step " << i + 1;
    EXPECT_NEAR(emu.grad_norm[i], cpu.grad_norm[i], 1e-3 * cpu.grad_norm[i]) << "step " << i + 1;
  }
  EXPECT_LT(cpu.loss.back(), cpu.loss.front());  // it trained
}

// With dropout, attention is built from matmul, softmax and dropout (nn/layers.cpp); without,
// it is the fused causal_attention kernel.
TEST(TrainEmu, ThreeStepsWithDropoutMatchCpu) { expect_same_training(0.1); }
TEST(TrainEmu, ThreeStepsWithoutDropoutMatchCpu) { expect_same_training(0); }

}  // namespace
}  // namespace glass
