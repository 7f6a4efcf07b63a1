// kernels/cuda/flash_attention.cu on emu, and the cpu flash entries, against an independent
// reference: the probs-based cpu kernels (kernels/cpu/attention.cpp, OpenBLAS GEMMs with the full
// T x T matrix) on q, k, v split out of the same qkv. T in {1, 7, 64, 129, 300} (partial tiles,
// one tile, many) x D in {16, 32, 64, 128}, B * H = 3, random inputs and a random dO. lse against
// the cpu flash entry run in f64. Then: same bits run to run and under shuffled thread orders,
// no float atomics; head dims and shapes the kernels refuse. The same kernels in bf16 (qkv, out,
// dout, dqkv bf16; lse f32) against the same f32 reference, to bf16 rounding, and their backward's
// bits.
#include <cmath>

#include "tests/cuda_kernels/attention_reference.h"
#include "tests/cuda_kernels/kernel_test.h"

namespace glass {
namespace {

using testing::all_close;
using testing::contains_all;
using testing::device_empty;
using testing::error_of;
using testing::expect_deterministic;
using testing::on_device;
using testing::to_cpu;

using testing::attention_reference;

TEST(FlashAttention, EmuAndCpuMatchTheProbsBasedCpuKernels) {
  Generator gen(31);
  for (const int64_t T : {1, 7, 64, 129, 300}) {
    // three slices: one batch of three heads, or three batches of one head (batch strides)
    const int64_t B = T % 2 ? 1 : 3, H = 3 / B;
    for (const int64_t D : {16, 32, 64, 128}) {
      SCOPED_TRACE("T " + std::to_string(T) + " D " + std::to_string(D));
      const int64_t C = H * D;
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      const Tensor qkv = randn({B, T, 3 * C}, gen, 0, 1.5), dout = randn({B, T, C}, gen);
      const testing::AttentionReference ref = attention_reference(qkv, dout, H);

      // emu: the hand-written CUDA kernels
      const Tensor dev_qkv = on_device(qkv), out = device_empty({B, T, C});
      const Tensor lse = device_empty({B, H, T}), dqkv = device_empty({B, T, 3 * C});
      kernels::cuda::flash_attention_forward(dev_qkv, out, lse, H, H, scale);
      kernels::cuda::flash_attention_backward(dev_qkv, out, lse, on_device(dout), dqkv, H, H,
                                              scale);
      EXPECT_TRUE(all_close(to_cpu(out), ref.out, 2e-5));
      EXPECT_TRUE(all_close(to_cpu(dqkv), ref.dqkv, 2e-5));

      // cpu: the flash entries' own loops; lse in f64 as the reference for both
      const Tensor out_cpu = Tensor::empty({B, T, C}), lse_cpu = Tensor::empty({B, H, T});
      const Tensor dqkv_cpu = Tensor::empty({B, T, 3 * C});
      kernels::cpu::flash_attention_forward(qkv, out_cpu, lse_cpu, H, H, scale);
      kernels::cpu::flash_attention_backward(qkv, out_cpu, lse_cpu, dout, dqkv_cpu, H, H, scale);
      EXPECT_TRUE(all_close(out_cpu, ref.out, 2e-5));
      EXPECT_TRUE(all_close(dqkv_cpu, ref.dqkv, 2e-5));
      const Tensor qkv64 = cast(qkv, DType::f64), out64 = Tensor::empty({B, T, C}, DType::f64);
      const Tensor lse64 = Tensor::empty({B, H, T});
      kernels::cpu::flash_attention_forward(qkv64, out64, lse64, H, H, scale);
      EXPECT_TRUE(all_close(to_cpu(lse), lse64, 1e-6));
    }
  }
}

TEST(FlashAttention, BackwardIsBitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(32);
  const int64_t B = 1, H = 3, T = 37, D = 16, C = H * D;
  const Tensor qkv = on_device(randn({B, T, 3 * C}, gen)), dout = on_device(randn({B, T, C}, gen));
  const Tensor out = device_empty({B, T, C}), lse = device_empty({B, H, T});
  const Tensor dqkv = device_empty({B, T, 3 * C});
  expect_deterministic({out, lse, dqkv}, [&] {
    kernels::cuda::flash_attention_forward(qkv, out, lse, H, H, 0.25);
    kernels::cuda::flash_attention_backward(qkv, out, lse, dout, dqkv, H, H, 0.25);
  });
}

// t (f32, on cpu) with every element rounded to bf16 and back.
Tensor round_to_bf16(const Tensor& t) { return cast(cast(t, DType::bf16), DType::f32); }

// bf16 storage, f32 math. Both sides start from the same numbers (qkv and dO rounded to bf16; the
// reference runs in f32 on the rounded values), so what separates them is each value the device
// stores in bf16, at most 2^-8 of its magnitude (one "unit"; 8 significant bits), judged against
// the reference's largest magnitude as CrossDeviceBf16 does:
// - out: one store (O), so 2 units (one, and one for f32 sums over T and D in a different order);
// - dqkv: one store, plus D_i = dO_i . O_i read from the stored bf16 O (dS = P (dP - D), so an
//   error of one unit in O moves dQ, dK by about one unit), plus the f32 sums: 4 units;
// - lse: f32, never stored in bf16, so f32 rounding (against the cpu flash entry in f32 on the
//   same rounded inputs): 2e-5 relative. A kernel that rounded its tiles or its running max and
//   sum to bf16 would miss these bounds.
TEST(FlashAttention, Bf16MatchesTheF32CpuReferenceWithinBf16Rounding) {
  constexpr double kUnit = 1.0 / 256;  // 2^-8
  Generator gen(33);
  for (const int64_t T : {1, 7, 64, 129}) {
    const int64_t B = T % 2 ? 1 : 3, H = 3 / B;
    for (const int64_t D : {16, 64, 128}) {
      SCOPED_TRACE("bf16 T " + std::to_string(T) + " D " + std::to_string(D));
      const int64_t C = H * D;
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      const Tensor qkv = round_to_bf16(randn({B, T, 3 * C}, gen, 0, 1.5));
      const Tensor dout = round_to_bf16(randn({B, T, C}, gen));
      const testing::AttentionReference ref = attention_reference(qkv, dout, H);
      const Tensor lse_ref = Tensor::empty({B, H, T}), out_ref = Tensor::empty({B, T, C});
      kernels::cpu::flash_attention_forward(qkv, out_ref, lse_ref, H, H, scale);

      const Tensor dev_qkv = on_device(cast(qkv, DType::bf16));
      const Tensor out = device_empty({B, T, C}, DType::bf16), lse = device_empty({B, H, T});
      const Tensor dqkv = device_empty({B, T, 3 * C}, DType::bf16);
      kernels::cuda::flash_attention_forward(dev_qkv, out, lse, H, H, scale);
      kernels::cuda::flash_attention_backward(dev_qkv, out, lse, on_device(cast(dout, DType::bf16)),
                                              dqkv, H, H, scale);
      EXPECT_TRUE(all_close(to_cpu(out), ref.out, 2 * kUnit));
      EXPECT_TRUE(all_close(to_cpu(dqkv), ref.dqkv, 4 * kUnit));
      EXPECT_TRUE(all_close(to_cpu(lse), lse_ref, 2e-5));
    }
  }
}

TEST(FlashAttention, Bf16BackwardIsBitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(34);
  const int64_t B = 1, H = 3, T = 37, D = 16, C = H * D;
  const Tensor qkv = on_device(cast(randn({B, T, 3 * C}, gen), DType::bf16));
  const Tensor dout = on_device(cast(randn({B, T, C}, gen), DType::bf16));
  const Tensor out = device_empty({B, T, C}, DType::bf16), lse = device_empty({B, H, T});
  const Tensor dqkv = device_empty({B, T, 3 * C}, DType::bf16);
  expect_deterministic({out, lse, dqkv}, [&] {
    kernels::cuda::flash_attention_forward(qkv, out, lse, H, H, 0.25);
    kernels::cuda::flash_attention_backward(qkv, out, lse, dout, dqkv, H, H, 0.25);
  });
}

TEST(FlashAttention, RefusesHeadDimsAndShapesItCannotTake) {
  const Tensor lse = device_empty({1, 2, 5});
  for (const int64_t D : {12, 8, 136}) {
    const int64_t C = 2 * D;
    const Tensor qkv = device_empty({1, 5, 3 * C}), out = device_empty({1, 5, C});
    const std::string msg =
        error_of([&] { kernels::cuda::flash_attention_forward(qkv, out, lse, 2, 2, 0.5); });
    EXPECT_TRUE(contains_all(msg, {"flash_attention_forward", "head dim D", std::to_string(D),
                                   "multiple of 8 in 16..128"}));
  }
  const Tensor qkv = device_empty({1, 5, 96}), out = device_empty({1, 5, 32});
  EXPECT_TRUE(contains_all(
      error_of([&] {
        kernels::cuda::flash_attention_forward(qkv, out, device_empty({1, 2, 4}), 2, 2, 1);
      }),
      {"lse f32[1, 2, 4]", "[B, n_head, T] = [1, 2, 5]"}));
  EXPECT_TRUE(contains_all(
      error_of([&] { kernels::cuda::flash_attention_forward(qkv, qkv, lse, 2, 2, 1); }),
      {"flash_attention_forward", "f32[1, 5, 96]", "[1, 5, 32]"}));
  EXPECT_TRUE(contains_all(
      error_of([&] { kernels::cuda::flash_attention_forward(qkv, out, lse, 5, 5, 1); }),
      {"qkv f32[1, 5, 96]", "last dim 96 is not (n_head + 2 n_kv_head) D = (5 + 2 * 5) D"}));
  EXPECT_TRUE(contains_all(
      error_of([&] { kernels::cuda::flash_attention_forward(qkv, out, lse, 2, 3, 1); }),
      {"flash_attention_forward", "n_kv_head 3 must divide n_head 2"}));
  // f32 and bf16 only; and the bf16 operands must all be bf16 (lse stays f32)
  const Tensor qkv64 = device_empty({1, 5, 96}, DType::f64),
               out64 = device_empty({1, 5, 32}, DType::f64);
  EXPECT_TRUE(contains_all(
      error_of([&] { kernels::cuda::flash_attention_forward(qkv64, out64, lse, 2, 2, 1); }),
      {"flash_attention_forward", "f64", "f32 or bf16"}));
  const Tensor qkv16 = device_empty({1, 5, 96}, DType::bf16);
  EXPECT_TRUE(contains_all(
      error_of([&] { kernels::cuda::flash_attention_forward(qkv16, out, lse, 2, 2, 1); }),
      {"flash_attention_forward", "bf16 [1, 5, 32]"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             kernels::cuda::flash_attention_forward(
                                 qkv16, device_empty({1, 5, 32}, DType::bf16),
                                 device_empty({1, 2, 5}, DType::bf16), 2, 2, 1);
                           }),
                           {"lse", "must be contiguous f32"}));
}

}  // namespace
}  // namespace glass
