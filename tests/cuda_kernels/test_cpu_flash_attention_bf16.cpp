// The cpu flash attention in bf16 (kernels/cpu/flash_attention.cpp with its vdpbf16ps products,
// kernels/cpu/attention_gemm_bf16.cpp), against references that share none of its code:
// - its products (attention_gemm_bf16, every causal band, odd k) against a triple loop in double;
// - forward and backward against the cpu flash entries in f32 on the same bf16-rounded inputs (the
//   f32 GEMM, kernels/cpu/sgemm.cpp, no bf16 operands) to bf16 rounding, lse to f32 rounding;
// - against the Tensor Core kernel `flash-mma` on emu (kernels/cuda/flash_attention_mma.cu), which
//   rounds the same values to bf16 (P and dS as operands, out, dq, dk, dv once) but sums in
//   another order (an mma's 16 products exactly, in double, per k16 step; vdpbf16ps two products
//   at a time in f32) and runs its softmax online over 64-key tiles: one bf16 step apart at most,
//   most elements the same bits, not all;
// - the vdpbf16ps path against the fallback (set_bf16_gemm_fallback(true)): the same bits,
// subnormal
//   inputs included; and the same bits run to run and under a shuffled thread order.
// T in {1, 17, 64, 129, 200} (one row, a partial query block, one block, a block and a row, a
// diagonal crossing tiles), D in {16, 32, 64}, multi-head and grouped-query heads.
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/backend.h"
#include "kernels/cpu/attention_gemm_bf16.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/sgemm.h"
#include "tests/cuda_kernels/kernel_test.h"

namespace glass::cpu_flash_bf16_test {
namespace {

using testing::all_close;
using testing::expect_deterministic;

constexpr double kUnit = 1.0 / 256;  // bf16's relative rounding, 2^-8

Tensor round_to_bf16(const Tensor& t) { return cast(cast(t, DType::bf16), DType::f32); }

struct Outputs {
  Tensor out, lse, dqkv;
};

// The cpu flash entries forward and backward in qkv's dtype (f32 or bf16), H query heads and Hkv
// key/value heads.
Outputs run_cpu(const Tensor& qkv, const Tensor& dout, int64_t H, int64_t Hkv) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = dout.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(C / H));
  Outputs o{Tensor::empty({B, T, C}, qkv.dtype()), Tensor::empty({B, H, T}),
            Tensor::empty(qkv.shape(), qkv.dtype())};
  kernels::cpu::flash_attention_forward(qkv, o.out, o.lse, H, Hkv, scale);
  kernels::cpu::flash_attention_backward(qkv, o.out, o.lse, dout, o.dqkv, H, Hkv, scale);
  return o;
}

// Random bf16-representable qkv [B, T, (H + 2 Hkv) D] (as f32) and dout [B, T, H D].
struct Inputs {
  Tensor qkv, dout;
};
Inputs random_inputs(Generator& gen, int64_t B, int64_t T, int64_t H, int64_t Hkv, int64_t D) {
  return {round_to_bf16(randn({B, T, (H + 2 * Hkv) * D}, gen, 0, 1.5)),
          round_to_bf16(randn({B, T, H * D}, gen))};
}

// The fraction of the elements of a and b (same shape) that are equal.
double equal_fraction(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = testing::values(a), y = testing::values(b);
  size_t equal = 0;
  for (size_t i = 0; i < x.size(); ++i) equal += x[i] == y[i];
  return static_cast<double>(equal) / static_cast<double>(x.size());
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// The shapes: (T, D, H, Hkv), B = 2.
struct Shape {
  int64_t T, D, H, Hkv;
};
const Shape kShapes[] = {{1, 16, 2, 2},   {17, 32, 2, 2},  {64, 64, 2, 1},
                         {129, 16, 4, 2}, {129, 64, 2, 2}, {200, 32, 2, 2}};

// attention_gemm_bf16, on both paths, against a triple loop in double over the same bf16 values:
// every wanted entry within the f32 sums' error (k 2^-24 of the sum of |terms|), the zeros of A
// placed where each band says they are, and C's own value kept by the accumulating form.
// One product of the test below: op(A) m x k (stored with row stride lda = its width + pad),
// op(B) k x n, on the fallback's model or the vdpbf16ps path.
struct ProductCase {
  int64_t m, n, k, pad;
  bool fallback;
  kernels::cpu::Causal causal;
  bool ta, tb, accumulate;
};

void expect_product_matches_double_loop(const ProductCase& t, Generator& gen) {
  using kernels::cpu::Causal;
  const auto [m, n, k, pad, fallback, causal, ta, tb, accumulate] = t;
  const auto [kind, diagonal] = causal;
  SCOPED_TRACE("m " + std::to_string(m) + " fallback " + std::to_string(fallback) + " kind " +
               std::to_string(kind) + " d " + std::to_string(diagonal) + " ta " +
               std::to_string(ta) + " tb " + std::to_string(tb) + " acc " +
               std::to_string(accumulate));
  // op(A) [m][k] with the band's zeros, op(B) [k][n]
  std::vector<float> A = to_vector<float>(round_to_bf16(randn({m, k}, gen)));
  const std::vector<float> Bv = to_vector<float>(round_to_bf16(randn({k, n}, gen)));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      if ((kind == Causal::kLowerA && p > i + diagonal) ||
          (kind == Causal::kUpperA && p < i + diagonal))
        A[i * k + p] = 0;
  const int64_t lda = (ta ? m : k) + pad;
  std::vector<bf16> a(static_cast<size_t>((ta ? k : m) * lda)), b(Bv.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p)
      a[ta ? p * lda + i : i * lda + p] = bf16::from_float(A[i * k + p]);
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) b[tb ? j * k + p : p * n + j] = bf16::from_float(Bv[p * n + j]);
  const std::vector<float> c0 = to_vector<float>(randn({m, n}, gen));
  std::vector<float> c = c0;
  kernels::cpu::set_bf16_gemm_fallback(fallback);
  kernels::cpu::attention_gemm_bf16(ta, tb, m, n, k, a.data(), lda, b.data(), tb ? k : n,
                                    accumulate, c.data(), n, causal);
  kernels::cpu::set_bf16_gemm_fallback(false);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      if (kind == Causal::kLowerC && j > i + diagonal) continue;  // not wanted
      double want = accumulate ? c0[i * n + j] : 0, size = std::abs(want);
      for (int64_t p = 0; p < k; ++p) {
        want += double(A[i * k + p]) * Bv[p * n + j];
        size += std::abs(double(A[i * k + p]) * Bv[p * n + j]);
      }
      ASSERT_NEAR(c[i * n + j], want, (k + 2) * 0x1p-24 * size + 1e-30)
          << "C[" << i << "][" << j << "]";
    }
}

TEST(CpuFlashAttentionBf16, ProductsMatchADoubleLoopInEveryCausalBand) {
  using kernels::cpu::Causal;
  Generator gen(71);
  // partial tiles and an odd k (A packed); whole 8-row tiles, an even k and A a view with a
  // wider row stride (A not transposed is then read where it is stored, as Q, P, dO and dS are);
  // each on the vdpbf16ps path (where the CPU has it) and on the fallback's model
  struct Sizes {
    int64_t m, n, k, pad;
  };
  for (const Sizes s : {Sizes{37, 45, 41, 0}, Sizes{40, 45, 42, 6}})
    for (const bool fallback : {false, true})
      for (const Causal::Kind kind :
           {Causal::kNone, Causal::kLowerC, Causal::kLowerA, Causal::kUpperA})
        for (const int64_t diagonal : {int64_t{0}, int64_t{5}, int64_t{-3}})
          for (const bool ta : {false, true})
            for (const bool tb : {false, true})
              for (const bool accumulate : {false, true})
                expect_product_matches_double_loop(
                    {s.m, s.n, s.k, s.pad, fallback, {kind, diagonal}, ta, tb, accumulate}, gen);
}

// The f32 cpu flash entries on the same bf16 values: the bf16 path rounds P and dS (as operands)
// and every output once, each at most 2^-9 relative of a term, so its sums move by at most half a
// unit of their terms' magnitudes: out within 2 units of the largest magnitude, dqkv 4 (D_i is
// read from the rounded O), as flash-mma is held to (tests/cuda_kernels/test_flash_attention_mma
// .cpp); lse stays f32 throughout: 2e-5 relative. A wrong band, tile or rounding rule is off by
// O(1) or by many units.
TEST(CpuFlashAttentionBf16, MatchesTheF32CpuPathWithinBf16Rounding) {
  Generator gen(72);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("T " + std::to_string(s.T) + " D " + std::to_string(s.D) + " H " +
                 std::to_string(s.H) + " Hkv " + std::to_string(s.Hkv));
    const Inputs in = random_inputs(gen, 2, s.T, s.H, s.Hkv, s.D);
    const Outputs ref = run_cpu(in.qkv, in.dout, s.H, s.Hkv);
    const Outputs got = run_cpu(cast(in.qkv, DType::bf16), cast(in.dout, DType::bf16), s.H, s.Hkv);
    EXPECT_EQ(got.out.dtype(), DType::bf16);
    EXPECT_TRUE(all_close(got.out, ref.out, 2 * kUnit));
    EXPECT_TRUE(all_close(got.dqkv, ref.dqkv, 4 * kUnit));
    EXPECT_TRUE(all_close(got.lse, ref.lse, 2e-5));
  }
}

// flash-mma on emu from the same bf16 inputs (its head dims: 32, 64). Both round the same values
// to bf16, so what separates them is the f32 sums' order, exp's last bits and the online softmax
// (a row past the first 64-key tile had that tile's P taken against a smaller running max and
// rescaled in f32): a stored value lands on the same bf16 or one step (2^-7 of its magnitude at
// most, 2 units) away. So: every element within 2 units of the largest magnitude, and at least
// 85% of them bit-identical (measured: 100% at T = 17, 99% at T = 64, 92-95% at T = 129 and 200).
// The f32 cpu path, which keeps P and dS in f32, rounded to bf16 matches only 52-79% of them: a
// kernel that rounded other values than flash-mma does would fail the count. lse: 2e-5 relative
// (exp2 and log2 against exp and log, both in f32).
TEST(CpuFlashAttentionBf16, MatchesFlashMmaOnEmuToItsRoundingSteps) {
  Generator gen(73);
  const kernels::Backend& emu = kernels::backend(kEmu);
  for (const Shape& s : kShapes) {
    if (s.D != 32 && s.D != 64) continue;
    SCOPED_TRACE("T " + std::to_string(s.T) + " D " + std::to_string(s.D) + " Hkv " +
                 std::to_string(s.Hkv));
    const Inputs in = random_inputs(gen, 2, s.T, s.H, s.Hkv, s.D);
    const Tensor qkv = cast(in.qkv, DType::bf16), dout = cast(in.dout, DType::bf16);
    const Outputs cpu = run_cpu(qkv, dout, s.H, s.Hkv);
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.D));
    const Tensor dev_qkv = to_device(qkv, kEmu);
    const Outputs mma{Tensor::empty(cpu.out.shape(), DType::bf16, kEmu),
                      Tensor::empty(cpu.lse.shape(), DType::f32, kEmu),
                      Tensor::empty(qkv.shape(), DType::bf16, kEmu)};
    emu.flash_attention_forward_mma(dev_qkv, mma.out, mma.lse, s.H, s.Hkv, scale);
    emu.flash_attention_backward_mma(dev_qkv, mma.out, mma.lse, to_device(dout, kEmu), mma.dqkv,
                                     s.H, s.Hkv, scale);
    const Tensor mma_out = to_device(mma.out, kCPU), mma_dqkv = to_device(mma.dqkv, kCPU);
    EXPECT_TRUE(all_close(cpu.out, mma_out, 2 * kUnit));
    EXPECT_TRUE(all_close(cpu.dqkv, mma_dqkv, 2 * kUnit));
    EXPECT_GE(equal_fraction(cpu.out, mma_out), 0.85);
    EXPECT_GE(equal_fraction(cpu.dqkv, mma_dqkv), 0.85);
    EXPECT_TRUE(all_close(cpu.lse, to_device(mma.lse, kCPU), 2e-5));
  }
}

// The vdpbf16ps micro-kernel and the fallback's scalar model of it: the same bits for the whole
// forward and backward, and for products whose inputs and sums are subnormal (the instruction
// reads subnormal inputs as zero and flushes subnormal results).
TEST(CpuFlashAttentionBf16, FastPathAndFallbackGiveTheSameBits) {
  if (!kernels::cpu::cpu_has_avx512_bf16())
    GTEST_SKIP() << "this CPU lacks AVX512-BF16: only the fallback runs here";
  Generator gen(74);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE("T " + std::to_string(s.T) + " D " + std::to_string(s.D));
    const Inputs in = random_inputs(gen, 2, s.T, s.H, s.Hkv, s.D);
    const Tensor qkv = cast(in.qkv, DType::bf16), dout = cast(in.dout, DType::bf16);
    const Outputs fast = run_cpu(qkv, dout, s.H, s.Hkv);
    kernels::cpu::set_bf16_gemm_fallback(true);
    const Outputs slow = run_cpu(qkv, dout, s.H, s.Hkv);
    kernels::cpu::set_bf16_gemm_fallback(false);
    EXPECT_TRUE(same_bits(fast.out, slow.out));
    EXPECT_TRUE(same_bits(fast.lse, slow.lse));
    EXPECT_TRUE(same_bits(fast.dqkv, slow.dqkv));
  }
  // tiny values: bf16 subnormals among the inputs, products and sums under f32's normal range
  const int64_t m = 17, n = 65, k = 40;
  std::vector<bf16> a(m * k), b(k * n);
  const std::vector<float> ra = to_vector<float>(randn({m * k}, gen)),
                           rb = to_vector<float>(randn({k * n}, gen));
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = bf16::from_float(ra[i] * (i % 3 == 0 ? 1e-39f : i % 3 == 1 ? 1e-20f : 1e-19f));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = bf16::from_float(rb[i] * (i % 2 == 0 ? 1e-19f : 1e-18f));
  std::vector<float> fast(m * n), slow(m * n);
  kernels::cpu::attention_gemm_bf16(false, false, m, n, k, a.data(), k, b.data(), n, false,
                                    fast.data(), n);
  kernels::cpu::set_bf16_gemm_fallback(true);
  kernels::cpu::attention_gemm_bf16(false, false, m, n, k, a.data(), k, b.data(), n, false,
                                    slow.data(), n);
  kernels::cpu::set_bf16_gemm_fallback(false);
  for (size_t i = 0; i < fast.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(fast[i]), std::bit_cast<uint32_t>(slow[i])) << "C " << i;
}

TEST(CpuFlashAttentionBf16, SameBitsRunToRunAndUnderShuffledThreadOrder) {
  Generator gen(75);
  const Inputs in = random_inputs(gen, 2, 129, 4, 2, 32);
  const Tensor qkv = cast(in.qkv, DType::bf16), dout = cast(in.dout, DType::bf16);
  Outputs o{Tensor::empty({2, 129, 4 * 32}, DType::bf16), Tensor::empty({2, 4, 129}),
            Tensor::empty(qkv.shape(), DType::bf16)};
  const double scale = 1.0 / std::sqrt(32.0);
  expect_deterministic({o.out, o.lse, o.dqkv}, [&] {
    kernels::cpu::flash_attention_forward(qkv, o.out, o.lse, 4, 2, scale);
    kernels::cpu::flash_attention_backward(qkv, o.out, o.lse, dout, o.dqkv, 4, 2, scale);
  });
}

}  // namespace
}  // namespace glass::cpu_flash_bf16_test
