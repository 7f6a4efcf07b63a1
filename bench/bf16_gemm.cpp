// bench_bf16_gemm: the cpu's bf16 GEMM (sgemm_bf16, kernels/cpu/sgemm_bf16.cpp) against glass's f32
// sgemm on the same values, on the GEMM shapes of a training step of the default model (L4 H4
// C256, 2048 tokens) and of GPT-2 124M (C768, 1024 tokens, vocabulary 50257). Three columns per
// shape: f32 sgemm, bf16 through the vdpbf16ps micro-kernel (where the CPU has AVX512-BF16), and
// bf16 through the f32 conversion path; they alternate, best of --repeats each, same threads.
// The last column is the vdpbf16ps rate as a share of the bf16 hardware peak (2x the f32 peak,
// kernels/cpu/hardware_peak.h) of the cores the threads use. Every path writes an f32 C: the
// rounding to bf16 after the epilogue is not timed here.
//
// --slab-depth N also times the fast path with k slabs of N (set_sgemm_slab_depth), interleaved.
//
//   build/bench/bench_bf16_gemm [--threads 2] [--repeats 5] [--only gpt2] [--slab-depth 256]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/hardware_peak.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/threads.h"
#include "samples/command_line.h"

namespace {

struct Shape {
  const char* what;
  bool ta, tb;
  int m, n, k;
};

// y = x W^T is (tokens x in) (out x in)^T; dx = dy W; dW = dy^T x.
constexpr Shape kShapes[] = {
    {"default qkv fwd  x W^T", false, true, 2048, 768, 256},
    {"default fc fwd   x W^T", false, true, 2048, 1024, 256},
    {"default proj fwd x W^T", false, true, 2048, 256, 1024},
    {"default fc dx    dy W", false, false, 2048, 256, 1024},
    {"default fc dW    dy^T x", true, false, 1024, 256, 2048},
    {"default lm head  x wte^T", false, true, 2048, 65, 256},
    {"gpt2 qkv fwd     x W^T", false, true, 1024, 2304, 768},
    {"gpt2 fc fwd      x W^T", false, true, 1024, 3072, 768},
    {"gpt2 proj fwd    x W^T", false, true, 1024, 768, 3072},
    {"gpt2 fc dx       dy W", false, false, 1024, 768, 3072},
    {"gpt2 fc dW       dy^T x", true, false, 3072, 768, 1024},
    {"gpt2 lm head     x wte^T", false, true, 1024, 50257, 768},
    {"square 512^3", false, false, 512, 512, 512},
};

double seconds(auto&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  namespace cpu = glass::kernels::cpu;
  int threads = 2, repeats = 5, other_depth = 0;
  std::string only;
  CLI::App app{"glass bf16 GEMM (vdpbf16ps and the f32 conversion path) against its f32 sgemm"};
  app.add_option("--threads", threads, "glass's threads");
  app.add_option("--repeats", repeats, "best of this many timings per shape and path");
  app.add_option("--only", only, "only the shapes whose name contains this (e.g. gpt2)");
  app.add_option("--slab-depth", other_depth,
                 "also time the bf16 fast path with k slabs of this depth, beside the machine's")
      ->check(CLI::PositiveNumber);
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_bf16_gemm"))
    return *status;
  cpu::set_threads(threads);

  const auto peak = cpu::hardware_peak();
  const bool fast = cpu::cpu_has_avx512_bf16();
  // the peak of the cores these threads can use
  const double bf16_peak = peak.bf16_flops() * std::min(threads, peak.cores) / peak.cores;
  fmt::print("threads {}, AVX512-BF16 {}\n", threads, fast ? "yes" : "no (no fast path to time)");
  fmt::print("f32 peak {:.1f} GFLOP/s ({}); bf16 peak {:.1f} GFLOP/s\n", peak.flops() / 1e9,
             peak.derivation(), peak.bf16_flops() / 1e9);
  const std::string other_column = fmt::format("KC {} GF/s", other_depth);
  fmt::print("{:<26}{:>18}{:>10}{:>11}{:>11}{:>10}{:>13}{:>14}\n", "shape", "m x n x k", "f32 GF/s",
             "bf16 GF/s", "conv GF/s", "bf16/f32", "% bf16 peak", other_depth ? other_column : "");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (const Shape& s : kShapes) {
    if (std::string_view(s.what).find(only) == std::string_view::npos) continue;
    // stored sizes: A is m x k (k x m transposed), B k x n (n x k), C m x n; the f32 operands hold
    // the bf16 values exactly, so every path multiplies the same numbers
    std::vector<glass::bf16> a16(size_t(s.m) * s.k), b16(size_t(s.k) * s.n);
    std::vector<float> a(a16.size()), b(b16.size()), c(size_t(s.m) * s.n);
    for (size_t i = 0; i < a.size(); ++i)
      a16[i] = glass::bf16::from_float(uniform(rng)), a[i] = a16[i].to_float();
    for (size_t i = 0; i < b.size(); ++i)
      b16[i] = glass::bf16::from_float(uniform(rng)), b[i] = b16[i].to_float();
    const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    // enough calls per timing for ~20 ms of work at 100 GFLOP/s
    const double flops = 2.0 * s.m * s.n * s.k;
    const int calls = std::max(1, int(2e9 / flops));
    auto f32 = [&] {
      for (int i = 0; i < calls; ++i)
        cpu::sgemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(),
                   s.n);
    };
    auto bf16 = [&](bool conversion) {
      cpu::set_bf16_gemm_fallback(conversion);
      for (int i = 0; i < calls; ++i)
        cpu::sgemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a16.data(), lda, b16.data(), ldb, 0.0f,
                        c.data(), s.n);
      cpu::set_bf16_gemm_fallback(false);
    };
    double t_f32 = 1e30, t_fast = 1e30, t_conv = 1e30, t_other = 1e30;
    for (int r = 0; r < repeats; ++r) {  // alternate, so all see the same machine load
      t_f32 = std::min(t_f32, seconds(f32));
      if (fast) t_fast = std::min(t_fast, seconds([&] { bf16(false); }));
      t_conv = std::min(t_conv, seconds([&] { bf16(true); }));
      if (!other_depth || !fast) continue;
      cpu::set_sgemm_slab_depth(other_depth);
      t_other = std::min(t_other, seconds([&] { bf16(false); }));
      cpu::set_sgemm_slab_depth(0);
    }
    const auto rate = [&](double t) { return flops * calls / t / 1e9; };
    const auto shown = [&](double t) { return t < 1e30 ? fmt::format("{:.1f}", rate(t)) : "-"; };
    fmt::print("{:<26}{:>18}{:>10.1f}{:>11}{:>11.1f}{:>10}{:>13}{:>14}\n", s.what,
               fmt::format("{}x{}x{}", s.m, s.n, s.k), rate(t_f32), shown(t_fast), rate(t_conv),
               fast ? fmt::format("{:.2f}x", t_f32 / t_fast) : "-",
               fast ? fmt::format("{:.0f}%", 100 * rate(t_fast) * 1e9 / bf16_peak) : "-",
               other_depth ? shown(t_other) : "");
  }
}
