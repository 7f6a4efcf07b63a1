// `train_gpt --device emu`: a few training steps of a tiny GPT on emu match the same steps on cpu.
// Everything runs on the device: weight init (Philox), forward, backward, clipping, AdamW. The
// kernels differ (kernels/cuda vs kernels/cpu), so the losses agree to float tolerance only.
#include <gtest/gtest.h>

#include <vector>

#include "engine/allocator.h"
#include "tests/train/train_testing.h"

namespace glass {
namespace {

struct Trace {
  std::vector<double> loss, grad_norm;
};

Trace train(const std::string& device, double dropout, const std::string& attention = "auto",
            int64_t n_embd = 16) {
  train::TrainOptions o = testing::tiny_options();
  o.device = device;
  o.dropout = dropout;
  o.attention = attention;
  o.n_embd = n_embd;
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

void expect_same_training(double dropout, const std::string& emu_attention = "auto",
                          int64_t n_embd = 16, const std::string& cpu_attention = "auto") {
  const Trace cpu = train("cpu", dropout, cpu_attention, n_embd);
  const Trace emu = train("emu", dropout, emu_attention, n_embd);
  for (size_t i = 0; i < cpu.loss.size(); ++i) {
    EXPECT_NEAR(emu.loss[i], cpu.loss[i], 1e-4 * cpu.loss[i]) << "step " << i + 1;
    EXPECT_NEAR(emu.grad_norm[i], cpu.grad_norm[i], 1e-3 * cpu.grad_norm[i]) << "step " << i + 1;
  }
  EXPECT_LT(cpu.loss.back(), cpu.loss.front());  // it trained
}

// With dropout, attention is built from matmul, softmax and dropout (nn/layers.cpp); without,
// it is the fused causal_attention kernel (cpu: its flash kernel; emu at head dim 8: naive).
TEST(TrainEmu, ThreeStepsWithDropoutMatchCpu) { expect_same_training(0.1); }
TEST(TrainEmu, ThreeStepsWithoutDropoutMatchCpu) { expect_same_training(0); }
// FlashAttention on emu (head dim 16) against the probs-based kernel on cpu.
TEST(TrainEmu, ThreeStepsWithFlashAttentionMatchCpu) {
  expect_same_training(0, "flash", 32, "naive");
}

// The peak allocation of one training step at T = 512 on emu, with the given attention kernel.
int64_t peak_of_one_step(const std::string& attention) {
  train::TrainOptions o = testing::tiny_options();
  o.device = "emu";
  o.attention = attention;
  o.dropout = 0;
  o.n_layer = 1;  // one layer keeps the emulated step short; the bound below is per layer
  o.n_head = 2;
  o.n_embd = 32;  // head dim 16
  o.seq_len = 512;
  o.batch = 1;
  train::Trainer trainer(o);
  Allocator& allocator = Allocator::for_device(kEmu);
  allocator.reset_peaks();
  trainer.train_step();  // the same model, batch and optimizer state for both kernels
  return allocator.stats().peak_allocated_bytes;
}

// No T x T buffer with flash: the naive kernel keeps probs [B, H, T, T] f32 per layer from forward
// to backward (plus a dS scratch of that size in backward), flash only [B, H, T] of lse.
TEST(TrainEmu, FlashAttentionStepPeaksLowerByAtLeastOneTxTPerLayer) {
  const int64_t naive = peak_of_one_step("naive"), flash = peak_of_one_step("flash");
  const int64_t probs_bytes = 1 * 2 * 512 * 512 * 4;  // [B, H, T, T] f32
  EXPECT_GE(naive - flash, 1 * probs_bytes) << "naive peak " << naive << ", flash peak " << flash;
}

}  // namespace
}  // namespace glass
