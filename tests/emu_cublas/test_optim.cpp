// kernels/cuda/optim.cu on `emu` against the cpu optimizer steps over several steps, on sizes that
// leave a partial block (37, 1003) and one larger than the grid, so the grid-stride loop wraps.
// Both follow the same f32 formulas; only the compiler's FMA contraction may differ, so the
// tolerance is a few ulps of the values.
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/emu_cublas/emu_cublas_test.h"
#include "tests/testing.h"

namespace glass::emu_cublas_test {
namespace {

using glass::testing::all_close;

constexpr int64_t kSizes[] = {1, 37, 1003, 1024 * 256 + 7};

// param, grad and two state tensors with the same values on emu and on cpu.
struct State {
  Tensor p, g, s1, s2;
  State(int64_t n, Device device)
      : p(make(randoms(n, 1), {n}, device)),
        g(make(randoms(n, 2, 0.1), {n}, device)),
        s1(make(randoms(n, 3, 0.01), {n}, device)),
        s2(make(randoms(n, 4, 0.001), {n}, device)) {}
};

::testing::AssertionResult close(const Tensor& emu, const Tensor& cpu) {
  return all_close(as_double(read(emu)), as_double(read(cpu)), 1e-6);
}

TEST(EmuOptim, AdamWMatchesCpuOverSteps) {
  // Every size in one multi-tensor step, decay on all but the first.
  std::vector<State> e, c;
  std::vector<kernels::AdamWParam> on_emu, on_cpu;
  for (int64_t n : kSizes) {
    e.emplace_back(n, kEmu);
    c.emplace_back(n, kCPU);
    // v must stay non-negative: start it at g^2-like magnitudes.
    e.back().s2 = make(std::vector<float>(n, 1e-4f), {n}, kEmu);
    c.back().s2 = make(std::vector<float>(n, 1e-4f), {n}, kCPU);
  }
  for (size_t k = 0; k < e.size(); ++k) {
    const double wd = k == 0 ? 0.0 : 0.1;
    on_emu.push_back({e[k].p, e[k].g, e[k].s1, e[k].s2, wd});
    on_cpu.push_back({c[k].p, c[k].g, c[k].s1, c[k].s2, wd});
  }
  for (int64_t step = 1; step <= 3; ++step) {
    kernels::cuda::adamw_step(on_emu, {1e-2, 0.9, 0.95, 1e-8, step});
    kernels::cpu::adamw_step(on_cpu, {1e-2, 0.9, 0.95, 1e-8, step});
  }
  for (size_t k = 0; k < e.size(); ++k) {
    EXPECT_TRUE(close(e[k].p, c[k].p)) << "n " << kSizes[k];
    EXPECT_TRUE(close(e[k].s1, c[k].s1)) << "n " << kSizes[k];
    EXPECT_TRUE(close(e[k].s2, c[k].s2)) << "n " << kSizes[k];
  }
}

// The bf16 copy AdamW writes (AdamWParam::copy), on cpu and on emu: exactly the rounding to
// nearest even of the parameter it has just written (bf16::from_float of the values read back,
// not the kernel's own code), with the parameters and moments bit-identical to a step without
// copies. The copies sit at an odd offset for every other parameter (2-byte aligned only) and the
// first parameter has none. A step the finite gate skips leaves the rest and still writes the
// copies, of the unchanged parameters.
TEST(EmuOptim, AdamWWritesTheBf16CopiesAsTheCastOfTheNewParameters) {
  using Step = void (*)(std::span<const kernels::AdamWParam>, const kernels::AdamWHyper&);
  for (const auto& [device, step] : {std::pair<Device, Step>{kCPU, kernels::cpu::adamw_step},
                                     std::pair<Device, Step>{kEmu, kernels::cuda::adamw_step}}) {
    SCOPED_TRACE(device.str());
    std::vector<State> with, without;
    std::vector<Tensor> copies;
    std::vector<kernels::AdamWParam> a, b;
    for (size_t k = 0; k < std::size(kSizes); ++k) {
      const int64_t n = kSizes[k];
      with.emplace_back(n, device);
      without.emplace_back(n, device);
      with.back().s2 = make(std::vector<float>(n, 1e-4f), {n}, device);
      without.back().s2 = make(std::vector<float>(n, 1e-4f), {n}, device);
      const int64_t offset = static_cast<int64_t>(k % 2);
      const Tensor buffer = Tensor::empty({n + offset}, DType::bf16, device);
      copies.push_back(k == 0 ? Tensor() : buffer.as_strided({n}, {1}, offset));
      a.push_back({with[k].p, with[k].g, with[k].s1, with[k].s2, 0.1, copies[k]});
      b.push_back({without[k].p, without[k].g, without[k].s1, without[k].s2, 0.1});
    }
    const auto expect_copies_round_the_parameters = [&] {
      for (size_t k = 1; k < copies.size(); ++k) {
        const std::vector<float> p = read(with[k].p);
        const std::vector<bf16> c = read<bf16>(copies[k]);
        for (size_t i = 0; i < p.size(); ++i)
          ASSERT_EQ(c[i].bits, bf16::from_float(p[i]).bits) << "n " << kSizes[k] << " at " << i;
      }
    };
    for (int64_t t = 1; t <= 2; ++t) {
      step(a, {1e-2, 0.9, 0.95, 1e-8, t});
      step(b, {1e-2, 0.9, 0.95, 1e-8, t});
    }
    for (size_t k = 0; k < copies.size(); ++k) {
      EXPECT_EQ(read(with[k].p), read(without[k].p)) << "n " << kSizes[k];
      EXPECT_EQ(read(with[k].s1), read(without[k].s1)) << "n " << kSizes[k];
      EXPECT_EQ(read(with[k].s2), read(without[k].s2)) << "n " << kSizes[k];
    }
    expect_copies_round_the_parameters();
    // Gated off: parameters and moments stay, the copies (cleared first) are written again.
    const std::vector<float> before = read(with[2].p);
    for (size_t k = 1; k < copies.size(); ++k) kernels::backend(copies[k]).fill(copies[k], 0.0);
    const double off = 0.0;
    step(a, {1e-2, 0.9, 0.95, 1e-8, 3, Tensor(), make(std::vector<double>{off}, {1}, device)});
    EXPECT_EQ(read(with[2].p), before);
    expect_copies_round_the_parameters();
  }
}

TEST(EmuOptim, SgdMatchesCpuWithAndWithoutMomentum) {
  for (int64_t n : kSizes) {
    State e(n, kEmu), c(n, kCPU);
    for (bool first : {true, false}) {
      kernels::cuda::sgd_step(e.p, e.g, e.s1, 0.1, 0.9, 0.01, first);
      kernels::cpu::sgd_step(c.p, c.g, c.s1, 0.1, 0.9, 0.01, first);
    }
    // Plain SGD: no buffer.
    kernels::cuda::sgd_step(e.s2, e.g, Tensor(), 0.5, 0, 0.1, false);
    kernels::cpu::sgd_step(c.s2, c.g, Tensor(), 0.5, 0, 0.1, false);
    EXPECT_TRUE(close(e.p, c.p)) << "n " << n;
    EXPECT_TRUE(close(e.s1, c.s1)) << "n " << n;
    EXPECT_TRUE(close(e.s2, c.s2)) << "n " << n;
  }
}

TEST(EmuOptim, BadStateIsNamed) {
  State e(37, kEmu);
  const Tensor short_grad = Tensor::empty({36}, DType::f32, kEmu);
  const std::vector<kernels::AdamWParam> bad = {{e.p, short_grad, e.s1, e.s2, 0.0}};
  const std::vector<kernels::AdamWParam> good = {{e.p, e.g, e.s1, e.s2, 0.0}};
  EXPECT_CONTAINS(error_of([&] {
                    kernels::cuda::adamw_step(bad, {1e-3, 0.9, 0.999, 1e-8, 1});
                  }),
                  "adamw_step: state f32[36] on emu must be contiguous f32 shaped like the "
                  "parameter f32[37] on emu");
  EXPECT_CONTAINS(error_of([&] {
                    kernels::cuda::adamw_step(good, {1e-3, 0.9, 0.999, 1e-8, 0});
                  }),
                  "step 0 must count from 1");
  const Tensor cpu_grad = make(randoms(37, 2), {37}, kCPU);
  EXPECT_CONTAINS(
      error_of([&] { kernels::cuda::sgd_step(e.p, cpu_grad, e.s1, 0.1, 0.9, 0, true); }),
      "on its device");
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::sgd_step(e.p, e.g, Tensor(), 0.1, 0.9, 0, true); }),
                  "momentum 0.9 needs a buffer");
}

}  // namespace
}  // namespace glass::emu_cublas_test
