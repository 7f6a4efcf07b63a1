// kernels/cuda/flash_attention_mma.cu (FlashAttention-2 on the Tensor Cores, bf16) on emu and on
// cuda (a GPU, or the emulated CUDA runtime), against an independent reference: the probs-based
// cpu kernels in f32 (kernels/cpu/attention.cpp, with the whole T x T matrix) on the same
// bf16-rounded inputs, and the cpu flash entry's lse. Head dims 32, 64, 128; T in {1, 17, 129,
// 200} against the tiles (query tiles of 128 rows walking 64-key tiles; key tiles of 128 walking
// query tiles of 64, 32 at D = 128): one row; one partial tile; a full query tile plus one row
// (the second tile's warps past T, its last key tile one key); and a full tile plus a partial one
// whose diagonal spans two key tiles (warps that skip a tile, warps that mask it, warps past T).
// Two slices with batch and head strides; grouped-query heads (Hkv < H) against the reference on
// the repeated heads. Then: the same bits run to run and under a shuffled thread order; both
// kernels clean under the emulator's race check and uninitialised-memory check; the launches'
// names, unit, FLOPs and bytes; the inputs they refuse.
#include <cmath>

#include "engine/emu/settings.h"
#include "engine/launch.h"
#include "tests/cuda_kernels/attention_reference.h"
#include "tests/cuda_kernels/kernel_test.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

// (a namespace of its own: the suite's files share one translation unit in the unity build, and
// test_flash_attention.cpp has helpers of the same names)
namespace glass::flash_mma_test {
namespace {

using testing::all_close;
using testing::contains_all;
using testing::error_of;
using testing::expect_deterministic;

constexpr double kUnit = 1.0 / 256;  // bf16's relative rounding, 2^-8

using testing::cuda_kernel_devices;

Tensor round_to_bf16(const Tensor& t) { return cast(cast(t, DType::bf16), DType::f32); }
Tensor on(Device device, const Tensor& host) {
  return Tensor::from_host(host.raw_data(), host.shape(), host.dtype(), device);
}
Tensor back_to_cpu(const Tensor& t) { return to_device(t, kCPU); }

using testing::attention_reference;

struct Outputs {
  Tensor out, lse, dqkv;
};

// Both mma entries on `device`, from cpu f32 inputs (cast to bf16 there); Hkv key/value heads
// (qkv [B, T, (H + 2 Hkv) D], out [B, T, H D]).
Outputs run_mma(Device device, const Tensor& qkv, const Tensor& dout, int64_t H, int64_t Hkv = 0) {
  if (Hkv == 0) Hkv = H;
  const int64_t B = qkv.size(0), T = qkv.size(1), C = dout.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(C / H));
  const kernels::Backend& be = kernels::backend(device);
  const Tensor dev_qkv = on(device, cast(qkv, DType::bf16));
  Outputs o{Tensor::empty({B, T, C}, DType::bf16, device),
            Tensor::empty({B, H, T}, DType::f32, device),
            Tensor::empty(qkv.shape(), DType::bf16, device)};
  be.flash_attention_forward_mma(dev_qkv, o.out, o.lse, H, Hkv, scale);
  be.flash_attention_backward_mma(dev_qkv, o.out, o.lse, on(device, cast(dout, DType::bf16)),
                                  o.dqkv, H, Hkv, scale);
  return o;
}

// Both sides start from the same bf16 numbers; the reference is f32 throughout. The mma kernel
// rounds to bf16 what the CUDA-core one keeps in f32: P before P V (out), P and dS before dV =
// P^T dO, dK = dS^T Q and dQ = dS K. Each is one rounding of at most 2^-9 relative of a term in
// a sum, which moves the sum by at most half a unit (2^-8) of the sum of the terms' magnitudes;
// measured, the largest errors are ~0.9 units (out) and ~1.3 (dqkv) of the reference's largest
// magnitude, as flash-simt's are ~0.9 and ~1.3. So the bounds are flash-simt's
// (tests/cuda_kernels/test_flash_attention.cpp): out 2 units, dqkv 4 units; lse f32: 2e-5
// relative against the cpu flash entry (S and the running max and sum stay f32; a kernel that
// rounded them to bf16 would miss this by orders of magnitude). A wrong mask, tile or fragment
// mapping is off by O(1) (a mask shifted by one key fails every T > 1 case).
TEST(FlashAttentionMma, MatchesTheF32CpuKernelsWithinBf16Rounding) {
  Generator gen(41);
  for (const Device device : cuda_kernel_devices())
    for (const int64_t T : {1, 17, 129, 200}) {
      const int64_t B = T % 2 ? 1 : 2, H = 2 / B;  // two slices: batch or head strides
      for (const int64_t D : {32, 64, 128}) {
        SCOPED_TRACE(device.str() + " T " + std::to_string(T) + " D " + std::to_string(D));
        const int64_t C = H * D;
        const Tensor qkv = round_to_bf16(randn({B, T, 3 * C}, gen, 0, 1.5));
        const Tensor dout = round_to_bf16(randn({B, T, C}, gen));
        const testing::AttentionReference ref = attention_reference(qkv, dout, H);
        const Outputs got = run_mma(device, qkv, dout, H);
        EXPECT_TRUE(all_close(back_to_cpu(got.out), ref.out, 2 * kUnit));
        EXPECT_TRUE(all_close(back_to_cpu(got.dqkv), ref.dqkv, 4 * kUnit));
        EXPECT_TRUE(all_close(back_to_cpu(got.lse), ref.lse, 2e-5));
      }
    }
}

// Grouped-query attention, 4 query heads on 2 key/value heads, T = 200: the reference is the one
// above on the multi-head qkv whose key/value head h is head h / 2 (kernels/cuda/qkv_heads.h),
// its dK and dV summed over each group (in f32, as the key kernel sums them) into the grouped
// layout. A key kernel that walked the wrong query heads, or summed only one, is off by O(1).
TEST(FlashAttentionMma, GroupedQueryHeadsMatchTheF32CpuKernels) {
  Generator gen(46);
  const int64_t B = 1, H = 4, Hkv = 2, G = H / Hkv, T = 200, D = 32, C = H * D;
  const int64_t W = (H + 2 * Hkv) * D;
  const Tensor qkv = round_to_bf16(randn({B, T, W}, gen, 0, 1.5));
  const Tensor dout = round_to_bf16(randn({B, T, C}, gen));
  std::vector<float> mha(B * T * 3 * C);
  const float* grouped = qkv.data<float>();
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t part = 0; part < 3; ++part)  // q, k, v
          mha[(r * 3 + part) * C + h * D + d] =
              grouped[r * W + (part == 0 ? h * D : C + (part - 1) * Hkv * D + h / G * D) + d];
  const testing::AttentionReference ref =
      attention_reference(Tensor::from_host(mha.data(), {B, T, 3 * C}, DType::f32), dout, H);
  std::vector<float> want(B * T * W, 0.0f);
  const float* mha_grad = ref.dqkv.data<float>();
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d)
        for (int64_t part = 0; part < 3; ++part)
          want[r * W + (part == 0 ? h * D : C + (part - 1) * Hkv * D + h / G * D) + d] +=
              mha_grad[(r * 3 + part) * C + h * D + d];
  const Tensor want_dqkv = Tensor::from_host(want.data(), {B, T, W}, DType::f32);
  for (const Device device : cuda_kernel_devices()) {
    SCOPED_TRACE(device.str());
    const Outputs got = run_mma(device, qkv, dout, H, Hkv);
    EXPECT_TRUE(all_close(back_to_cpu(got.out), ref.out, 2 * kUnit));
    EXPECT_TRUE(all_close(back_to_cpu(got.dqkv), want_dqkv, 4 * kUnit));
    EXPECT_TRUE(all_close(back_to_cpu(got.lse), ref.lse, 2e-5));
  }
}

TEST(FlashAttentionMma, IsBitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(42);
  const int64_t B = 1, H = 2, T = 130, D = 32, C = H * D;
  const Tensor qkv = on(kEmu, cast(randn({B, T, 3 * C}, gen), DType::bf16));
  const Tensor dout = on(kEmu, cast(randn({B, T, C}, gen), DType::bf16));
  const Tensor out = Tensor::empty({B, T, C}, DType::bf16, kEmu);
  const Tensor lse = Tensor::empty({B, H, T}, DType::f32, kEmu);
  const Tensor dqkv = Tensor::empty({B, T, 3 * C}, DType::bf16, kEmu);
  expect_deterministic({out, lse, dqkv}, [&] {
    kernels::cuda::flash_attention_forward_mma(qkv, out, lse, H, H, 0.25);
    kernels::cuda::flash_attention_backward_mma(qkv, out, lse, dout, dqkv, H, H, 0.25);
  });
}

// The emulator's race check (every launch under several thread orders) and uninitialised-memory
// check (results that depend on memory never written) find nothing in either kernel: the
// barriers around the double buffers, the cp.async waits, the zero-filled tails.
TEST(FlashAttentionMma, CleanUnderRaceCheckAndInitCheck) {
  Generator gen(43);
  const emu::Settings saved = emu::settings();
  emu::Settings checked = saved;
  checked.race_check = true;
  checked.init_check = true;
  emu::set_settings(checked);
  // T = 130: two query tiles and two key tiles of 128, the second of each with warps past T;
  // T = 70 at D = 128 (one tile, warps that skip the second key tile): smaller, the emulator's
  // checks being slow
  for (const int64_t D : {32, 128}) {
    SCOPED_TRACE("D " + std::to_string(D));
    const int64_t B = 1, H = 1, T = D == 32 ? 130 : 70, C = D;
    const Tensor qkv = round_to_bf16(randn({B, T, 3 * C}, gen));
    const Tensor dout = round_to_bf16(randn({B, T, C}, gen));
    try {
      const Outputs got = run_mma(kEmu, qkv, dout, H);
      const testing::AttentionReference ref = attention_reference(qkv, dout, H);
      EXPECT_TRUE(all_close(back_to_cpu(got.out), ref.out, 2 * kUnit));
      EXPECT_TRUE(all_close(back_to_cpu(got.dqkv), ref.dqkv, 4 * kUnit));
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
  emu::set_settings(saved);
}

TEST(FlashAttentionMma, LaunchesNamedOnTheTensorCores) {
  Generator gen(44);
  const int64_t B = 1, H = 1, T = 20, D = 32;
  testing::LaunchLog log;
  run_mma(kEmu, randn({B, T, 3 * D}, gen), randn({B, T, D}, gen), H);
  const std::vector<LaunchInfo> launches = log.launches("flash_attention_");
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[0].kernel, std::string("flash_attention_forward_mma"));
  EXPECT_EQ(launches[1].kernel, std::string("flash_attention_backward_mma_query"));
  EXPECT_EQ(launches[2].kernel, std::string("flash_attention_backward_mma_key"));
  // FLOPs: the causal entries T (T + 1) / 2 times (4D + 5) forward
  EXPECT_DOUBLE_EQ(launches[0].flops, T * (T + 1) / 2 * (4.0 * D + 5));
  for (const LaunchInfo& l : launches) EXPECT_EQ(l.unit, ComputeUnit::tensor_core_bf16) << l.kernel;
}

// The launches' bytes count what the kernels load, tile by tile (planned on meta: shapes only,
// nothing runs). Forward: Q read and O written once (2 T rows), and the query tile of rows q0 ..
// q0 + 127 reads K and V rows 0 .. min(T, q0 + 128) - 1; lse written. Query kernel: Q, dO, O read
// and dQ written (4 T rows), K and V as the forward; lse read, D written. Key kernel: K, V read
// and dK, dV written (4 T rows); the key tile of keys k0 .. k0 + 127 reads the Q and dO rows k0 ..
// T - 1 with their lse and D (f32). GPT-2's layer (T = 1024, 12 heads of 64): K and V rows
// 128 (1 + ... + 8) = 4608, as many Q and dO rows (1024 8 - 128 (0 + ... + 7)), half what 64-row
// tiles re-read (64 (1 + ... + 16) = 8704); and a tail, T = 200: K and V rows 128 + 200, Q and
// dO rows 200 + 72.
TEST(FlashAttentionMma, LaunchBytesCountTheTilesEachBlockReads) {
  struct Case {
    int64_t H, T, D;
    double key_rows, query_rows;  // per head
  };
  for (const Case c : {Case{12, 1024, 64, 4608, 4608}, Case{1, 200, 32, 328, 272}}) {
    SCOPED_TRACE("T " + std::to_string(c.T));
    const int64_t B = 1, C = c.H * c.D;
    auto empty = [](const Shape& s, DType d) { return Tensor::empty(s, d, kMeta); };
    const Tensor qkv = empty({B, c.T, 3 * C}, DType::bf16), dqkv = empty(qkv.shape(), DType::bf16);
    const Tensor out = empty({B, c.T, C}, DType::bf16), dout = empty(out.shape(), DType::bf16);
    const Tensor lse = empty({B, c.H, c.T}, DType::f32);
    testing::LaunchLog log;
    const kernels::Backend& be = kernels::backend(kMeta);
    be.flash_attention_forward_mma(qkv, out, lse, c.H, c.H, 0.125);
    be.flash_attention_backward_mma(qkv, out, lse, dout, dqkv, c.H, c.H, 0.125);
    const std::vector<LaunchInfo> launches = log.launches("flash_attention_");
    ASSERT_EQ(launches.size(), 3u);
    const double row = static_cast<double>(C) * 2, stats = static_cast<double>(c.H * c.T) * 4;
    const double T = static_cast<double>(c.T);
    EXPECT_DOUBLE_EQ(launches[0].bytes, row * (2 * T + 2 * c.key_rows) + stats);
    EXPECT_DOUBLE_EQ(launches[1].bytes, row * (4 * T + 2 * c.key_rows) + 2 * stats);
    EXPECT_DOUBLE_EQ(launches[2].bytes,
                     row * (4 * T + 2 * c.query_rows) + 2 * c.H * c.query_rows * 4.0);
    for (const LaunchInfo& l : launches) {  // blocks of 8 warps, tiles of 128 rows
      EXPECT_EQ(l.grid.x, static_cast<unsigned>((c.T + 127) / 128)) << l.kernel;
      EXPECT_EQ(l.grid.y, static_cast<unsigned>(c.H)) << l.kernel;
      EXPECT_EQ(l.block.x, 256u) << l.kernel;
    }
  }
}

// On a GPU only (on the emulated runtime these shapes would take hours; scripts/gpu_check.sh's
// attention-mma stage runs it): the Tensor Core kernel and cuDNN (where built) against flash-simt
// at long sequences, T = 1k, 4k, 16k and D = 64, 128, one batch of two heads, bf16. Each of the
// three rounds differently (flash-simt keeps P and dS in f32; mma rounds them to bf16; cuDNN is
// its own), so they agree to a few units of bf16 of the largest magnitude: 8 units for out and
// dqkv, as against the f32 reference above; a wrong tile at long T is off by O(1).
TEST(FlashAttentionMma, OnAGpuAgreesWithFlashSimtAndCudnnAtLongSequences) {
#if defined(GLASS_HAS_CUDA) && !defined(GLASS_CUDA_RUNTIME_EMU)
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA GPU";
  Generator gen(45);
  const kernels::Backend& be = kernels::backend(kCUDA);
  for (const int64_t T : {1024, 4096, 16384})
    for (const int64_t D : {64, 128}) {
      SCOPED_TRACE("T " + std::to_string(T) + " D " + std::to_string(D));
      const int64_t B = 1, H = 2, C = H * D;
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      const Tensor qkv = on(kCUDA, cast(randn({B, T, 3 * C}, gen, 0, 1.5), DType::bf16));
      const Tensor dout = on(kCUDA, cast(randn({B, T, C}, gen), DType::bf16));
      using Forward = decltype(be.flash_attention_forward);
      using Backward = decltype(be.flash_attention_backward);
      auto run = [&](Forward forward, Backward backward) {
        Outputs o{Tensor::empty({B, T, C}, DType::bf16, kCUDA),
                  Tensor::empty({B, H, T}, DType::f32, kCUDA),
                  Tensor::empty({B, T, 3 * C}, DType::bf16, kCUDA)};
        forward(qkv, o.out, o.lse, H, scale);
        backward(qkv, o.out, o.lse, dout, o.dqkv, H, scale);
        return o;
      };
      const Outputs simt = run(be.flash_attention_forward, be.flash_attention_backward);
      const Tensor simt_out = cast(back_to_cpu(simt.out), DType::f32);
      const Tensor simt_dqkv = cast(back_to_cpu(simt.dqkv), DType::f32);
      std::vector<std::pair<const char*, Outputs>> others;
      others.emplace_back("flash-mma",
                          run(be.flash_attention_forward_mma, be.flash_attention_backward_mma));
      if (be.cudnn_attention_forward)
        others.emplace_back("cudnn", run(be.cudnn_attention_forward, be.cudnn_attention_backward));
      for (const auto& [name, o] : others) {
        SCOPED_TRACE(name);
        EXPECT_TRUE(all_close(cast(back_to_cpu(o.out), DType::f32), simt_out, 8 * kUnit));
        EXPECT_TRUE(all_close(cast(back_to_cpu(o.dqkv), DType::f32), simt_dqkv, 8 * kUnit));
        EXPECT_TRUE(all_close(back_to_cpu(o.lse), back_to_cpu(simt.lse), 1e-4));
      }
    }
#else
  GTEST_SKIP() << "needs a GPU (not the emulated CUDA runtime)";
#endif
}

TEST(FlashAttentionMma, RefusesF32AndHeadDimsItDoesNotTake) {
  const Tensor lse = Tensor::empty({1, 1, 5}, DType::f32, kEmu);
  const Tensor qkv32 = Tensor::empty({1, 5, 96}, DType::f32, kEmu);
  const Tensor out32 = Tensor::empty({1, 5, 32}, DType::f32, kEmu);
  EXPECT_TRUE(contains_all(
      error_of([&] { kernels::cuda::flash_attention_forward_mma(qkv32, out32, lse, 1, 1, 1); }),
      {"flash_attention_forward_mma", "f32", "bf16 only", "flash-simt"}));
  for (const int64_t D : {16, 48, 256}) {
    const Tensor qkv = Tensor::empty({1, 5, 3 * D}, DType::bf16, kEmu);
    const Tensor out = Tensor::empty({1, 5, D}, DType::bf16, kEmu);
    EXPECT_TRUE(contains_all(
        error_of([&] { kernels::cuda::flash_attention_forward_mma(qkv, out, lse, 1, 1, 1); }),
        {"flash_attention_forward_mma", "head dim D", std::to_string(D), "32, 64 or 128"}));
  }
}

}  // namespace
}  // namespace glass::flash_mma_test
