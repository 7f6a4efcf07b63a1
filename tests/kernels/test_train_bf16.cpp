// `train_gpt --device emu --dtype bf16`: mixed precision end to end on emu (the kernels a GPU runs,
// in bf16, with the f32 master weights in the optimizer), and `--device cpu --dtype bf16` (the
// cpu kernels with the same rounding rules, kernels/cpu/element.h).
// - Against PyTorch in f32 (tests/oracle/torch_gpt.py) on the same weights and tokens: 3 AdamW
//   steps give losses within 2e-2 relative and master weights close to PyTorch's (the tolerance is
//   derived below), with the naive attention kernel and with FlashAttention.
// - With FlashAttention in bf16 (the default attention on emu): 3 steps agree with the f32 run on
//   cpu (probs-based attention) within the same bound.
// - cpu in bf16 against PyTorch f32 the same way (naive attention and flash).
// - Two bf16 runs give the same bits; a resumed bf16 run equals the uninterrupted one, bit for bit
//   (emu and cpu).
// - The plumbing: the masters stay f32 with f32 gradients, the step's GEMMs are bf16 (emu and
//   cpu), AdamW writes the bf16 copies (each its master rounded), and the loss falls on cpu.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

#include "engine/rng.h"
#include "nn/safetensors.h"
#include "tests/testing.h"
#include "tests/train/train_testing.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass {
namespace {

using testing::all_close;
using testing::values;

std::vector<std::vector<float>> master_weights(const train::Trainer& t) {
  std::vector<std::vector<float>> w;
  for (const auto& [name, p] : t.model().named_parameters()) w.push_back(to_vector<float>(p));
  return w;
}

train::TrainOptions tiny_bf16() {
  train::TrainOptions o = testing::tiny_options();
  o.device = "emu";
  o.dtype = "bf16";
  o.steps = 3;
  return o;
}

// An llm.c token shard of `tokens` (ids < 2^16).
void write_shard(const std::string& path, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  for (int32_t t : tokens) {
    const uint16_t v = static_cast<uint16_t>(t);
    out.write(reinterpret_cast<const char*>(&v), 2);
  }
}

// 3 AdamW steps of `train_gpt --device <device> --dtype bf16 --attention <attention>` against
// PyTorch f32, with n_head heads of 32 / n_head dims each; `launched`: the attention kernel the
// steps must have launched (none: "").
void expect_matches_pytorch_f32(const std::string& attention, int64_t n_head,
                                const std::string& launched, const std::string& device = "emu") {
  SCOPED_TRACE("--device " + device + " --attention " + attention);
  const std::string script = std::string(GLASS_SOURCE_DIR) + "/tests/oracle/torch_gpt.py";
  const std::string dir = testing::temp_dir("bf16_oracle_" + device + "_" + attention);
  // 1. A tiny GPT's f32 weights, and a token shard whose training split is exactly one batch of
  //    B x T tokens, so that every step reads the same batch (the oracle's K steps on one batch):
  //    71 tokens, 10% (7) held out, 64 = 4 x 16 for training.
  const int64_t V = 65, B = 4, T = 16;
  const GPTConfig cfg{
      .vocab_size = V, .block_size = T, .n_layer = 2, .n_head = n_head, .n_embd = 32};
  GPT model(cfg);
  Generator gen(2024);
  model.init(gen);
  std::vector<int32_t> tokens;
  for (uint64_t i = 0; i < 71; ++i)
    tokens.push_back(static_cast<int32_t>(philox_word(7, 0, i) % V));
  const std::string weights = dir + "/weights.safetensors", shard = dir + "/tokens.bin";
  const std::string batch = dir + "/batch.safetensors", out = dir + "/torch.safetensors";
  save_safetensors(weights, model.state_dict());
  write_shard(shard, tokens);

  // 2. train_gpt --device emu --dtype bf16 from those weights: constant lr, no clipping (the
  //    oracle has none), no dropout.
  train::TrainOptions o = testing::tiny_options();
  o.device = device;
  o.dtype = "bf16";
  o.data = shard;
  o.vocab_size = V;
  o.init = weights;
  o.n_head = n_head;
  o.seq_len = T;
  o.batch = B;
  o.steps = 3;
  o.dropout = 0;
  o.lr = 1e-2;
  o.lr_schedule = "constant";
  o.warmup = 0;
  o.grad_clip = 0;
  o.weight_decay = 0.1;
  o.attention = attention;
  train::Trainer trainer(o);
  ASSERT_EQ(trainer.dtype(), DType::bf16);
  testing::LaunchLog log;
  const train::Batch b = train::BatchLoader(&trainer.data().train, B, T, false, 0).batch(0, kCPU);
  save_safetensors(batch, {{"x", b.x}, {"y", b.y}});
  std::vector<double> losses;
  for (int s = 0; s < o.steps; ++s) losses.push_back(trainer.train_step().loss);
  if (launched.empty())
    EXPECT_TRUE(log.launches("flash_attention_forward").empty());
  else
    EXPECT_FALSE(log.launches(launched).empty()) << launched;

  // 3. PyTorch in f32 on the same weights and batch.
  const std::string cmd = fmt::format(
      "/usr/bin/python3 {} --weights {} --batch {} --n-head {} --steps {} --lr {} "
      "--weight-decay {} --beta1 {} --beta2 {} --eps {} --threads 1 --out {}",
      script, weights, batch, n_head, o.steps, o.lr, o.weight_decay, o.beta1, o.beta2, o.eps, out);
  if (std::system(cmd.c_str()) != 0) {
    if (std::system("/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null") != 0)
      GTEST_SKIP() << "PyTorch oracle skipped: /usr/bin/python3 cannot import torch and numpy";
    FAIL() << "the oracle failed: " << cmd;
  }
  const SafeTensorsFile ref = load_safetensors(out);

  // 4. The losses: bf16 activations carry ~2^-8 relative error each, which averages out in the
  //    mean over B x T tokens; 2e-2 relative is the bound.
  EXPECT_TRUE(all_close(losses, values(ref.at("losses")), 2e-2));
  // And the bf16 run is not the f32 one: it is bf16 to within that bound, not to f32 rounding.
  const std::vector<double> ref_losses = values(ref.at("losses"));
  EXPECT_GT(std::abs(losses[0] - ref_losses[0]), 1e-7 * ref_losses[0]);

  // 5. The master weights after 3 steps, to bf16's bound (testing::bf16_steps_close says why).
  const SafeTensorsFile before = load_safetensors(weights);
  std::vector<testing::WeightsAfterSteps> after;
  for (const auto& [name, p] : trainer.model().named_parameters()) {
    ASSERT_EQ(p.dtype(), DType::f32) << name << ": the masters stay f32";
    after.push_back({name, values(before.at(name)), values(p), values(ref.at("after." + name))});
  }
  EXPECT_TRUE(testing::bf16_steps_close(after, o.steps, o.lr));
}

// The naive attention kernel (head dim 8, which flash does not take) and FlashAttention (head dim
// 16: the CUDA-core kernel) in bf16.
TEST(TrainBf16, ThreeAdamWStepsMatchPyTorchF32) { expect_matches_pytorch_f32("naive", 4, ""); }
TEST(TrainBf16, ThreeAdamWStepsWithFlashAttentionMatchPyTorchF32) {
  expect_matches_pytorch_f32("flash", 2, "flash_attention_forward");
}
// FlashAttention-2 on the Tensor Cores (head dim 32), on emu and on cuda (a GPU, or the emulated
// CUDA runtime: the cuda build's host code and launches).
TEST(TrainBf16, ThreeAdamWStepsWithFlashMmaAttentionMatchPyTorchF32) {
  expect_matches_pytorch_f32("flash-mma", 1, "flash_attention_forward_mma");
}
TEST(TrainBf16, ThreeAdamWStepsOnCudaWithFlashMmaAttentionMatchPyTorchF32) {
#if defined(GLASS_HAS_CUDA)
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA GPU (and not the emulated runtime)";
  expect_matches_pytorch_f32("flash-mma", 1, "flash_attention_backward_mma_key", "cuda");
#else
  GTEST_SKIP() << "built without the cuda device";
#endif
}

// bf16 on emu with --attention flash against f32 on cpu (naive attention: kernels/cpu, GEMMs
// with the T x T matrix; nothing shared with the flash kernels), 3 AdamW steps without dropout on
// the same weights and batches. Losses within 2e-2 relative (as against PyTorch above: each bf16
// store is at most 2^-8 relative and these average out over the B x T tokens of the mean), and
// the gradient norms, which sum squares of bf16 gradients, within 5e-2. Both runs must also have
// trained (loss falling), and the bf16 step must have launched the flash kernels, so a silent
// fallback to naive attention fails here.
TEST(TrainBf16, FlashAttentionThreeStepsMatchF32CpuWithinBf16Tolerance) {
  train::TrainOptions o = tiny_bf16();
  o.attention = "flash";
  o.dropout = 0;
  o.n_embd = 32;  // n_head 2: head dim 16, what flash takes
  train::TrainOptions f = o;
  f.device = "cpu";
  f.dtype = "f32";
  f.attention = "naive";
  train::Trainer bf16_run(o), f32_run(f);
  testing::LaunchLog log;
  std::vector<train::StepResult> got, want;
  for (int s = 0; s < o.steps; ++s) {
    got.push_back(bf16_run.train_step());
    want.push_back(f32_run.train_step());
  }
  EXPECT_EQ(log.launches("flash_attention_forward").size(),
            static_cast<size_t>(o.steps * o.n_layer));
  EXPECT_EQ(log.launches("flash_attention_backward_key").size(),
            static_cast<size_t>(o.steps * o.n_layer));
  for (int s = 0; s < o.steps; ++s) {
    EXPECT_NEAR(got[s].loss, want[s].loss, 2e-2 * want[s].loss) << "step " << s + 1;
    EXPECT_NEAR(got[s].grad_norm, want[s].grad_norm, 5e-2 * want[s].grad_norm) << "step " << s + 1;
  }
  EXPECT_LT(got.back().loss, got.front().loss);
  EXPECT_LT(want.back().loss, want.front().loss);
}

// On cpu (kernels/cpu in bf16, GEMMs through gemm_bf16): naive attention (head dim 8) and flash.
TEST(TrainBf16, CpuThreeAdamWStepsMatchPyTorchF32) {
  expect_matches_pytorch_f32("naive", 4, "", "cpu");
}
TEST(TrainBf16, CpuThreeAdamWStepsWithFlashAttentionMatchPyTorchF32) {
  expect_matches_pytorch_f32("flash", 2, "flash_attention_forward", "cpu");
}

void expect_two_runs_same_bits(const std::string& device) {
  SCOPED_TRACE("--device " + device);
  train::TrainOptions o = tiny_bf16();  // dropout 0.1 on
  o.device = device;
  train::Trainer a(o), b(o);
  std::vector<double> la, lb;
  for (int s = 0; s < o.steps; ++s) {
    la.push_back(a.train_step().loss);
    lb.push_back(b.train_step().loss);
  }
  EXPECT_EQ(la, lb);
  EXPECT_EQ(master_weights(a), master_weights(b));
  train::TrainOptions f = o;
  f.dtype = "f32";
  train::Trainer f32(f);
  for (int s = 0; s < f.steps; ++s) f32.train_step();
  EXPECT_NE(master_weights(f32), master_weights(a)) << "--dtype bf16 ran in f32";
}
TEST(TrainBf16, TwoRunsGiveTheSameBitsAndDifferFromF32) { expect_two_runs_same_bits("emu"); }
TEST(TrainBf16, CpuTwoRunsGiveTheSameBitsAndDifferFromF32) { expect_two_runs_same_bits("cpu"); }

void expect_resume_bit_exact(const std::string& device) {
  SCOPED_TRACE("--device " + device);
  const std::string dir = testing::temp_dir("bf16_resume_" + device);
  train::TrainOptions o = tiny_bf16();
  o.device = device;
  o.steps = 4;
  o.lr_schedule = "constant";
  train::Trainer straight(o);
  straight.run();
  train::TrainOptions first = o;
  first.steps = 2;
  first.checkpoint_dir = dir;
  train::Trainer part1(first);
  part1.run();
  train::TrainOptions second = o;
  second.resume = dir;
  train::Trainer part2(second);
  EXPECT_EQ(part2.step(), 2);
  part2.run();
  EXPECT_EQ(master_weights(part2), master_weights(straight));
  EXPECT_NE(master_weights(part1), master_weights(part2));
}
TEST(TrainBf16, ResumeIsBitExact) { expect_resume_bit_exact("emu"); }
TEST(TrainBf16, CpuResumeIsBitExact) { expect_resume_bit_exact("cpu"); }

// One step's launches: bf16 GEMMs, the gradients cast to f32 for the masters, AdamW on f32
// writing the bf16 copies in its own pass (no cast in the optimizer phase). After each step every
// copy holds its master rounded to nearest even (bf16::from_float of the master's values read
// back), bit for bit, as the cast it replaces wrote.
TEST(TrainBf16, AStepRunsBf16GemmsAndAdamWWritesTheCopies) {
  train::TrainOptions o = tiny_bf16();
  o.dropout = 0;
  train::Trainer t(o);
  for (int s = 0; s < 2; ++s) {
    testing::LaunchLog log;
    t.train_step();
    EXPECT_FALSE(log.launches("cublasGemmStridedBatchedEx").empty());
    EXPECT_TRUE(log.launches("cublasSgemm").empty());
    const std::vector<std::string> opt = log.kernels(Phase::optimizer);
    EXPECT_NE(std::find(opt.begin(), opt.end(), "adamw_step"), opt.end());
    EXPECT_EQ(std::count(opt.begin(), opt.end(), "cast"), 0);
  }
  const NamedTensors params = t.model().named_parameters();
  const std::vector<Tensor> copies = t.model().parameter_copies();
  ASSERT_EQ(copies.size(), params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    EXPECT_EQ(p.dtype(), DType::f32) << name;
    EXPECT_FALSE(p.grad().defined()) << name;  // zero_grad after the step
    ASSERT_TRUE(copies[i].defined()) << name;
    const std::vector<float> master = to_vector<float>(p);
    const std::vector<bf16> copy = to_vector<bf16>(copies[i]);
    for (size_t j = 0; j < master.size(); ++j)
      ASSERT_EQ(copy[j].bits, bf16::from_float(master[j]).bits) << name << " at " << j;
  }
}

// cpu: the step's tensors are bf16 (the GEMMs and the other kernels), the masters f32 with AdamW
// on them writing the bf16 copies (no cast in the optimizer phase), and the loss falls over a few
// steps.
TEST(TrainBf16, CpuStepRunsBf16KernelsAndLossFalls) {
  train::TrainOptions o = tiny_bf16();
  o.device = "cpu";
  o.dropout = 0;
  o.steps = 20;
  o.batch = 8;
  o.seq_len = 32;
  o.lr = 1e-2;
  o.lr_schedule = "constant";
  o.warmup = 0;
  train::Trainer t(o);
  ASSERT_EQ(t.dtype(), DType::bf16);
  testing::LaunchLog log;
  std::vector<double> losses;
  for (int s = 0; s < o.steps; ++s) losses.push_back(t.train_step().loss);
  // each step reads another batch: the mean of the last 5 losses against the first 5's
  const auto mean5 = [](auto first) { return std::accumulate(first, first + 5, 0.0) / 5; };
  EXPECT_LT(mean5(losses.end() - 5), 0.9 * mean5(losses.begin()));
  const std::vector<std::string> opt = log.kernels(Phase::optimizer);
  EXPECT_EQ(static_cast<size_t>(std::count(opt.begin(), opt.end(), "adamw_step")),
            static_cast<size_t>(o.steps));
  EXPECT_EQ(std::count(opt.begin(), opt.end(), "cast"), 0);
  for (const auto& [name, p] : t.model().named_parameters())
    EXPECT_EQ(p.dtype(), DType::f32) << name;
}

}  // namespace
}  // namespace glass
