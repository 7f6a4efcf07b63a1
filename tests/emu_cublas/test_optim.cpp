// kernels/cuda/optim.cu on `emu` against the cpu optimizer steps over several steps, on sizes that
// leave a partial block (37, 1003) and one larger than the grid, so the grid-stride loop wraps.
// Both follow the same f32 formulas; only the compiler's FMA contraction may differ, so the
// tolerance is a few ulps of the values.
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
