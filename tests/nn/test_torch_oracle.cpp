// The whole model against PyTorch: the same weights and batch go to tests/oracle/torch_gpt.py
// through safetensors, and the loss, every parameter's gradient, the losses of K AdamW steps and
// the weights after them must agree to f32 rounding (tolerances scale with each reference
// tensor's largest magnitude), on cpu and on emu (fused GEMM epilogues). Skipped, with a message
// saying so, where /usr/bin/python3 cannot import torch.
#include <cstdlib>
#include <filesystem>

#include "nn/gpt.h"
#include "optim/adamw.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

const char* kPython = "/usr/bin/python3";

TEST(TorchOracle, TinyGPTLossGradientsAndAdamWStepsMatchPyTorch) {
  const std::string script = std::string(GLASS_SOURCE_DIR) + "/tests/oracle/torch_gpt.py";
  ASSERT_TRUE(std::filesystem::exists(script)) << script;

  // 1. A tiny GPT with random weights and a random batch, written for the oracle.
  const GPTConfig cfg{.vocab_size = 65, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32};
  const int64_t B = 4, T = 16;
  const int steps = 3;
  const AdamWOptions opt{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  GPT model(cfg);
  Generator gen(2024);
  model.init(gen);
  const Tensor x = random_ids(B, T, cfg.vocab_size, gen), y = random_ids(B, T, cfg.vocab_size, gen);
  const std::string weights = scratch_path("oracle_weights.safetensors");
  const std::string batch = scratch_path("oracle_batch.safetensors");
  const std::string out = scratch_path("oracle_out.safetensors");
  save_safetensors(weights, model.state_dict());
  save_safetensors(batch, {{"x", x}, {"y", y}});

  // 2. PyTorch's answers.
  const std::string cmd = fmt::format(
      "{} {} --weights {} --batch {} --n-head {} --steps {} --lr {} --weight-decay {} --beta1 {} "
      "--beta2 {} --eps {} --threads 1 --out {}",
      kPython, script, weights, batch, cfg.n_head, steps, opt.lr, opt.weight_decay, opt.beta1,
      opt.beta2, opt.eps, out);
  if (std::system(cmd.c_str()) != 0) {
    // Only a missing PyTorch is a reason to skip. It is checked after the fact, because importing
    // torch a second time would double the test's time; any other failure fails the test.
    const std::string probe = fmt::format("{} -c 'import torch, numpy' 2>/dev/null", kPython);
    if (std::system(probe.c_str()) != 0)
      GTEST_SKIP() << "PyTorch oracle skipped: " << kPython
                   << " cannot import torch and numpy (apt install python3-torch python3-numpy)";
    FAIL() << "the oracle failed: " << cmd;
  }
  const SafeTensorsFile ref = load_safetensors(out);
  auto ref_values = [&](const std::string& name) { return values(ref.at(name)); };

  // 3 and 4, on cpu and, where built, on emu, whose GEMMs carry the bias adds, the GELU and their
  // gradients as cuBLASLt epilogues (the fused path against PyTorch's unfused one).
  std::vector<Device> devices{kCPU};
#if defined(GLASS_HAS_EMU)
  devices.push_back(kEmu);
#endif
  for (const Device device : devices) {
    SCOPED_TRACE(device.str());
    GPT m(cfg);
    Generator same(2024);
    m.init(same);  // the weights written for the oracle
    m.to(device);
    const Tensor xd = to_device(x, device), yd = to_device(y, device);
    // 3. Loss and every gradient at the initial weights.
    const Tensor loss = cross_entropy(m.forward(xd), yd);
    backward(loss);
    EXPECT_NEAR(item(loss), ref_values("loss")[0], 1e-5 * ref_values("loss")[0]);
    for (const auto& [name, p] : m.named_parameters())
      EXPECT_TRUE(all_close(values(to_device(p.grad(), kCPU)), ref_values("grad." + name), 1e-4))
          << "gradient of " << name;

    // 4. K AdamW steps on the same batch: the loss before each step, then the weights.
    AdamW adamw(m.named_parameters(), opt);
    std::vector<double> losses;
    for (int s = 0; s < steps; ++s) {
      adamw.zero_grad();
      const Tensor l = cross_entropy(m.forward(xd), yd);
      backward(l);
      adamw.step();
      losses.push_back(item(l));
    }
    EXPECT_TRUE(all_close(losses, ref_values("losses"), 1e-5));
    // rtol 1e-3 here: the key bias gets no gradient in exact arithmetic (adding a constant to
    // every key shifts a softmax row uniformly), so its gradient is rounding noise of ~1e-11 in
    // both engines, and Adam's m / sqrt(v) turns that noise into updates of up to ~lr * 1e-3. A
    // real optimizer error moves weights by ~lr = 1e-2, far outside this tolerance.
    for (const auto& [name, p] : m.named_parameters())
      EXPECT_TRUE(all_close(values(to_device(p, kCPU)), ref_values("after." + name), 1e-3))
          << "weights after " << steps << " AdamW steps: " << name;
  }
}

}  // namespace
}  // namespace glass
