// Causal self-attention in bf16 against PyTorch (tests/oracle/torch_attention.py, float64 on the
// same bf16 numbers): the Tensor Core kernel (--attention flash-mma) forward and backward through
// autograd, on emu and on cuda (a GPU, or the emulated CUDA runtime), for head dims 32, 64, 128
// and T of a partial tile and of two tiles. out and dqkv within bf16 rounding of PyTorch's: 2 and
// 4 units of 2^-8 of the reference's largest magnitude (one bf16 store each, P and dS rounded to
// bf16 before their products, tests/cuda_kernels/test_flash_attention_mma.cpp); the flash-simt
// kernel in bf16 alongside, to the same bounds. Then grouped-query attention (fewer key/value heads
// than query heads) for every kernel. Where /usr/bin/python3 cannot import torch the test skips
// (fails under GLASS_REQUIRE_ORACLE=1), as the model oracles do.
#include <cmath>

#include "autograd/ops.h"
#include "nn/safetensors.h"
#include "tests/testing.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass::attention_oracle_test {
namespace {

using testing::all_close;

constexpr double kUnit = 1.0 / 256;  // bf16's relative rounding, 2^-8

using testing::cuda_kernel_devices;

TEST(AttentionTorchOracle, Bf16FlashKernelsMatchPyTorchWithinBf16Rounding) {
  const std::string script = std::string(GLASS_SOURCE_DIR) + "/tests/oracle/torch_attention.py";
  struct Case {
    int64_t D, T;
  };
  const Case cases[] = {{32, 100}, {64, 21}, {128, 70}};  // two tiles, one partial, one and a bit
  const int64_t B = 2, H = 2;
  // bf16 inputs (as a bf16 model hands them over), written as they are; one oracle run for all
  Generator gen(2026);
  NamedTensors inputs;
  for (const Case& c : cases) {
    const std::string tag = std::to_string(c.D) + "_" + std::to_string(c.T);
    inputs.emplace_back("qkv." + tag, cast(randn({B, c.T, 3 * H * c.D}, gen, 0, 1.5), DType::bf16));
    inputs.emplace_back("dout." + tag, cast(randn({B, c.T, H * c.D}, gen), DType::bf16));
  }
  const std::string in = testing::scratch_path("attention_oracle_in.safetensors");
  const std::string out = testing::scratch_path("attention_oracle_out.safetensors");
  save_safetensors(in, inputs);
  const testing::OracleRun run =
      testing::run_torch_oracle(fmt::format("{} {} --input {} --n-head {} --threads 1 --out {}",
                                            testing::kTorchPython, script, in, H, out));
  if (run.skip) GTEST_SKIP() << run.message;
  ASSERT_TRUE(run.ran) << run.message;
  const SafeTensorsFile ref = load_safetensors(out);
  for (size_t i = 0; i < std::size(cases); ++i) {
    const std::string tag = std::to_string(cases[i].D) + "_" + std::to_string(cases[i].T);
    const Tensor& qkv = inputs[2 * i].second;
    const Tensor& dout = inputs[2 * i + 1].second;
    for (const Device device : cuda_kernel_devices())
      for (const AttentionKernel kernel :
           {AttentionKernel::flash_mma, AttentionKernel::flash_simt}) {
        SCOPED_TRACE(fmt::format("{} {} {}", device.str(), attention_kernel_name(kernel), tag));
        const Tensor x = to_device(qkv, device).set_requires_grad(true);
        testing::LaunchLog log;
        const Tensor y = causal_attention(x, H, kernel);
        backward(y, to_device(dout, device));
        EXPECT_FALSE(log.launches(kernel == AttentionKernel::flash_mma
                                      ? "flash_attention_backward_mma_key"
                                      : "flash_attention_backward_key")
                         .empty());
        EXPECT_TRUE(
            all_close(cast(to_device(y, kCPU), DType::f32), ref.at("out." + tag), 2 * kUnit));
        EXPECT_TRUE(all_close(cast(to_device(x.grad(), kCPU), DType::f32), ref.at("dqkv." + tag),
                              4 * kUnit));
      }
  }
}

// Grouped-query attention (n_kv_head < n_head) against PyTorch computing it with repeat_interleave
// of k and v: every kernel that takes it. The Tensor Core and CUDA-core flash kernels and the naive
// kernel in bf16 on emu and cuda (the same bounds as above: a key/value head's dK and dV are f32
// sums over its query heads rounded once); the cpu flash and naive kernels in f32 on the same
// bf16 numbers (f32 rounding only: 1e-5). A group of 2 (H 4, Hkv 2) at head dim 32 and T of two
// tiles, one partial; a group of 4 (H 4, Hkv 1: one key/value head, multi-query attention) at head
// dim 64 and T of one partial tile. One oracle run per n_kv_head.
TEST(AttentionTorchOracle, GroupedQueryAttentionMatchesPyTorchRepeatInterleave) {
  const std::string script = std::string(GLASS_SOURCE_DIR) + "/tests/oracle/torch_attention.py";
  struct Case {
    int64_t Hkv, D, T;
  };
  const int64_t B = 1, H = 4;
  for (const Case& c : {Case{2, 32, 70}, Case{1, 64, 21}}) {
    const int64_t Hkv = c.Hkv;
    const std::string tag = std::to_string(c.D) + "_" + std::to_string(c.T);
    Generator gen(2027 + Hkv);
    const Tensor qkv = cast(randn({B, c.T, (H + 2 * Hkv) * c.D}, gen, 0, 1.5), DType::bf16);
    const Tensor dout = cast(randn({B, c.T, H * c.D}, gen), DType::bf16);
    const std::string in = testing::scratch_path("attention_gqa_oracle_in.safetensors");
    const std::string out = testing::scratch_path("attention_gqa_oracle_out.safetensors");
    save_safetensors(in, {{"qkv." + tag, qkv}, {"dout." + tag, dout}});
    const testing::OracleRun run = testing::run_torch_oracle(
        fmt::format("{} {} --input {} --n-head {} --n-kv-head {} --threads 1 --out {}",
                    testing::kTorchPython, script, in, H, Hkv, out));
    if (run.skip) GTEST_SKIP() << run.message;
    ASSERT_TRUE(run.ran) << run.message;
    const SafeTensorsFile ref = load_safetensors(out);
    struct Run {
      Device device;
      AttentionKernel kernel;
      DType dtype;
      double out_tol, dqkv_tol;
    };
    std::vector<Run> runs = {{kCPU, AttentionKernel::flash, DType::f32, 1e-5, 1e-5},
                             {kCPU, AttentionKernel::naive, DType::f32, 1e-5, 1e-5}};
    for (const Device device : cuda_kernel_devices())
      for (const AttentionKernel kernel :
           {AttentionKernel::flash_mma, AttentionKernel::flash_simt, AttentionKernel::naive})
        runs.push_back({device, kernel, DType::bf16, 2 * kUnit, 4 * kUnit});
    for (const Run& r : runs) {
      SCOPED_TRACE(fmt::format("{} {} Hkv {} {}", r.device.str(), attention_kernel_name(r.kernel),
                               Hkv, tag));
      const Tensor x = to_device(cast(qkv, r.dtype), r.device).set_requires_grad(true);
      const Tensor y = causal_attention(x, H, Hkv, r.kernel);
      backward(y, to_device(cast(dout, r.dtype), r.device));
      EXPECT_TRUE(all_close(cast(to_device(y, kCPU), DType::f32), ref.at("out." + tag), r.out_tol));
      EXPECT_TRUE(all_close(cast(to_device(x.grad(), kCPU), DType::f32), ref.at("dqkv." + tag),
                            r.dqkv_tol));
    }
  }
}

}  // namespace
}  // namespace glass::attention_oracle_test
