// The whole Llama (GPTConfig::arch = llama) against PyTorch: the same weights and batch go to
// tests/oracle/torch_llama.py (a Llama written from the definitions, not from glass) through
// safetensors, and the loss, every parameter's gradient, the losses of 3 AdamW steps and the
// weights after them must agree: in f32 to f32 rounding (the losses to 1e-5 relative, each
// gradient to 1e-5 and each weight after the steps to 1e-3 of its tensor's largest magnitude in
// the reference), and for bf16 mixed precision (f32 masters, bf16 compute copies) against PyTorch
// in f32 to bf16's bound. Grouped-query attention (n_kv_head < n_head) every
// time, the LM head tied and untied, on cpu, emu and cuda (a GPU, or the emulated CUDA runtime).
// The tests are TorchOracle.*, so that tests/CMakeLists.txt's checks that a missing PyTorch fails
// `make test` (GLASS_REQUIRE_ORACLE=1) and skips a bare ctest cover them as they cover GPT-2's.
#include <filesystem>

#include "nn/llama.h"
#include "nn/safetensors.h"
#include "optim/adamw.h"
#include "tests/testing.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass {
namespace {

using namespace testing;

// A tiny Llama: V 65, T 16, 2 layers, SwiGLU hidden 3C/2, RoPE theta and RMSNorm eps as given.
GPTConfig oracle_llama_config(int64_t n_embd, int64_t n_head, int64_t n_kv_head, bool tie,
                              double rope_theta = 10000, double norm_eps = 1e-5) {
  return {.vocab_size = 65,
          .block_size = 16,
          .n_layer = 2,
          .n_head = n_head,
          .n_embd = n_embd,
          .arch = Arch::llama,
          .n_kv_head = n_kv_head,
          .ffn_hidden = 3 * n_embd / 2,
          .rope_theta = rope_theta,
          .norm_eps = norm_eps,
          .tie_embeddings = tie};
}

// The comparison for a Llama of `cfg` run on `device` in `dtype` (f32, or bf16 compute copies of
// f32 masters) with `attention` behind its attention; `launched`: a kernel the steps must have
// launched, so that a silent fallback to another attention kernel fails ("" = not checked).
void expect_llama_matches_pytorch(const GPTConfig& cfg, Device device, AttentionKernel attention,
                                  DType dtype = DType::f32, const std::string& launched = "") {
  const std::string script = std::string(GLASS_SOURCE_DIR) + "/tests/oracle/torch_llama.py";
  ASSERT_TRUE(std::filesystem::exists(script)) << script;
  ASSERT_EQ(cfg.arch, Arch::llama);

  // 1. A tiny Llama with glass's initialisation, its RMSNorm weights moved away from 1 (so that a
  //    weight applied in the wrong place changes the forward), and a random batch, for the oracle.
  const int64_t B = 4, T = 16;
  const int steps = 3;
  // Adam's eps 1e-6, not 1e-8: an element's update is lr * m^/(sqrt(v^) + eps), so where a
  // gradient cancels to the size of eps (a few of a step's 10^4 elements do) the update follows
  // the gradient's rounding noise, amplified by ~lr / eps: with 1e-8, a gradient of 1e-8 whose f32
  // noise is 5e-10 moves its weight by ~1e-4, as far apart as PyTorch's own f32 and f64 runs are
  // (1.4e-3 of the largest weight); with 1e-6, 100 times less.
  const AdamWOptions opt{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1};
  Llama model(cfg);
  Generator gen(2024);
  model.init(gen);
  NamedTensors norms;
  for (const auto& [name, p] : model.named_parameters())
    if (name.ends_with("norm.weight"))
      norms.emplace_back(name, rnd(p.shape(), gen, DType::f32) * 0.1 + 1.0);
  ASSERT_EQ(norms.size(), static_cast<size_t>(2 * cfg.n_layer + 1)) << "RMSNorm weights";
  model.load_state_dict(norms, /*strict=*/false);
  std::map<std::string, Shape> shapes;
  for (const auto& [name, p] : model.named_parameters()) shapes[name] = p.shape();
  const int64_t C = cfg.n_embd, D = cfg.head_dim(), F = cfg.ffn();
  EXPECT_EQ(shapes["model.layers.0.self_attn.qkv_proj.weight"],
            (Shape{(cfg.n_head + 2 * cfg.kv_heads()) * D, C}));
  EXPECT_EQ(shapes["model.layers.1.mlp.gate_up_proj.weight"], (Shape{2 * F, C}));
  EXPECT_EQ(shapes.count("lm_head.weight"), cfg.tie_embeddings ? 0u : 1u) << "lm_head.weight";
  const Tensor x = random_ids(B, T, cfg.vocab_size, gen), y = random_ids(B, T, cfg.vocab_size, gen);
  const std::string weights = scratch_path("llama_oracle_weights.safetensors");
  const std::string batch = scratch_path("llama_oracle_batch.safetensors");
  const std::string out = scratch_path("llama_oracle_out.safetensors");
  save_safetensors(weights, model.state_dict());
  save_safetensors(batch, {{"x", x}, {"y", y}});
  model.to(device);
  model.set_attention(attention);
  if (dtype != DType::f32) model.set_compute_dtype(dtype);
  const Tensor x_dev = to_device(x, device), y_dev = to_device(y, device);

  // 2. PyTorch's answers, in f32.
  const std::string cmd = fmt::format(
      "{} {} --weights {} --batch {} --n-head {} --n-kv-head {} --rope-theta {} --norm-eps {} "
      "--steps {} --lr {} --weight-decay {} --beta1 {} --beta2 {} --eps {} --threads 1 --out {}",
      kTorchPython, script, weights, batch, cfg.n_head, cfg.kv_heads(), cfg.rope_theta,
      cfg.norm_eps, steps, opt.lr, opt.weight_decay, opt.beta1, opt.beta2, opt.eps, out);
  const OracleRun run = run_torch_oracle(cmd);
  if (run.skip) GTEST_SKIP() << run.message;
  ASSERT_TRUE(run.ran) << run.message;
  const SafeTensorsFile ref = load_safetensors(out);
  auto ref_values = [&](const std::string& name) { return values(ref.at(name)); };
  const size_t n_params = model.named_parameters().size();
  ASSERT_EQ(ref.tensors.size(), 2 + 2 * n_params)
      << "the oracle's outputs: loss, losses, grad.* after.*";

  // 3. Loss and every gradient at the initial weights. bf16: each activation stored in bf16
  //    carries up to 2^-8 relative error; over the B x T tokens of the mean they average out to
  //    2e-2 on the loss, and over all of a step's gradients to 5e-2 of their norm.
  testing::LaunchLog log;
  const bool f32 = dtype == DType::f32;
  const Tensor loss = model.loss(model.forward(x_dev), y_dev);
  backward(loss);
  const double ref_loss = ref_values("loss")[0];
  EXPECT_NEAR(item(loss), ref_loss, (f32 ? 1e-5 : 2e-2) * ref_loss);
  double grad_diff2 = 0, grad_ref2 = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_EQ(p.dtype(), DType::f32) << name << ": the masters stay f32";
    const std::vector<double> got = values(to_device(p.grad(), kCPU));
    const std::vector<double> want = ref_values("grad." + name);
    if (f32) {
      EXPECT_TRUE(all_close(got, want, 1e-5)) << "gradient of " << name;
    }
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      grad_diff2 += (got[i] - want[i]) * (got[i] - want[i]);
      grad_ref2 += want[i] * want[i];
    }
  }
  if (!f32) {
    EXPECT_LE(std::sqrt(grad_diff2), 5e-2 * std::sqrt(grad_ref2))
        << "relative gradient error " << std::sqrt(grad_diff2 / grad_ref2);
  }

  // 4. K AdamW steps on the same batch: the loss before each step, then the weights (bf16: the
  //    compute copies cast afresh from the masters after each step, as train_gpt does).
  AdamW adamw(model.named_parameters(), opt);
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    adamw.zero_grad();
    const Tensor l = model.loss(model.forward(x_dev), y_dev);
    backward(l);
    adamw.step();
    model.refresh_compute_copies();
    losses.push_back(item(l));
  }
  if (!launched.empty()) {
    EXPECT_FALSE(log.launches(launched).empty()) << launched;
  }
  const std::vector<double> ref_losses = ref_values("losses");
  EXPECT_TRUE(all_close(losses, ref_losses, f32 ? 1e-5 : 2e-2));
  EXPECT_LT(ref_losses.back(), ref_losses.front()) << "PyTorch's steps trained";
  if (f32) {
    // rtol 1e-3 of each tensor's largest weight: a real optimizer error moves weights by ~lr =
    // 1e-2 per step, far outside it. (Llama has no biases, and so no parameter whose exact
    // gradient is 0 while its rounding noise is not, as GPT-2's key bias: test_torch_oracle.cpp.)
    for (const auto& [name, p] : model.named_parameters())
      EXPECT_TRUE(all_close(values(to_device(p, kCPU)), ref_values("after." + name), 1e-3))
          << "weights after " << steps << " AdamW steps: " << name;
    return;
  }
  // bf16 is bf16 to within its bound, not f32 to f32 rounding in disguise.
  EXPECT_GT(std::abs(losses[0] - ref_losses[0]), 1e-7 * ref_losses[0]) << "bf16 ran in f32";
  const SafeTensorsFile before = load_safetensors(weights);
  std::vector<WeightsAfterSteps> after;
  for (const auto& [name, p] : model.named_parameters())
    after.push_back(
        {name, values(before.at(name)), values(to_device(p, kCPU)), ref_values("after." + name)});
  EXPECT_TRUE(bf16_steps_close(after, steps, opt.lr));
}

// cpu (kernels/cpu, the automatic attention), 2 query heads per key/value head, a separate LM
// head, and RoPE theta and RMSNorm eps away from their defaults (so that both reach the kernels).
TEST(TorchOracle, TinyLlamaGqaUntiedMatchesPyTorch) {
  expect_llama_matches_pytorch(oracle_llama_config(32, 4, 2, /*tie=*/false, 500, 1e-4), kCPU,
                               AttentionKernel::automatic);
}

// cpu, 4 query heads on 1 key/value head (multi-query), the LM head tied to the embedding (its
// gradient the sum of both uses).
TEST(TorchOracle, TinyLlamaMultiQueryTiedMatchesPyTorch) {
  expect_llama_matches_pytorch(oracle_llama_config(32, 4, 1, /*tie=*/true), kCPU,
                               AttentionKernel::automatic);
}

// emu with the hand-written FlashAttention kernel (head dim 16), untied.
TEST(TorchOracle, TinyLlamaOnEmuWithFlashAttentionMatchesPyTorch) {
  expect_llama_matches_pytorch(oracle_llama_config(64, 4, 2, /*tie=*/false), kEmu,
                               AttentionKernel::flash, DType::f32, "flash_attention_forward");
}

// bf16 mixed precision on emu, FlashAttention-2 on the Tensor Cores (head dim 32), against
// PyTorch in f32.
TEST(TorchOracle, TinyLlamaBf16OnEmuWithFlashMmaMatchesPyTorchF32) {
  expect_llama_matches_pytorch(oracle_llama_config(64, 2, 1, /*tie=*/false), kEmu,
                               AttentionKernel::flash_mma, DType::bf16,
                               "flash_attention_forward_mma");
}

// bf16 mixed precision on cpu (kernels/cpu/element.h: RMSNorm, RoPE, SwiGLU, grouped-query flash
// attention and the GEMMs in bf16, math in f32), against PyTorch in f32 to the same bound.
TEST(TorchOracle, TinyLlamaBf16OnCpuMatchesPyTorchF32) {
  expect_llama_matches_pytorch(oracle_llama_config(64, 4, 2, /*tie=*/false), kCPU,
                               AttentionKernel::flash, DType::bf16, "flash_attention_forward");
}

// The same on cuda: on a GPU, or on the emulated CUDA runtime (-DGLASS_CUDA_RUNTIME=emu, CI's
// build), where the cuda device's host code, streams and stream-ordered cuBLAS(Lt) run the model;
// tied, f32 and bf16.
TEST(TorchOracle, TinyLlamaOnCudaWithFlashAttentionMatchesPyTorch) {
#if defined(GLASS_HAS_CUDA)
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA GPU (and not the emulated runtime)";
  expect_llama_matches_pytorch(oracle_llama_config(64, 4, 2, /*tie=*/true), kCUDA,
                               AttentionKernel::flash, DType::f32, "flash_attention_forward");
#else
  GTEST_SKIP() << "built without the cuda device";
#endif
}

TEST(TorchOracle, TinyLlamaBf16OnCudaWithFlashMmaMatchesPyTorchF32) {
#if defined(GLASS_HAS_CUDA)
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA GPU (and not the emulated runtime)";
  expect_llama_matches_pytorch(oracle_llama_config(64, 2, 1, /*tie=*/true), kCUDA,
                               AttentionKernel::flash_mma, DType::bf16,
                               "flash_attention_forward_mma");
#else
  GTEST_SKIP() << "built without the cuda device";
#endif
}

}  // namespace
}  // namespace glass
