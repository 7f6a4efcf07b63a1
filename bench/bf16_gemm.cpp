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
// --step instead times every bf16 GEMM of the default model's training step (4 layers, 2048
// tokens) as the step calls it: the forward products with their bias and the bf16 result rounded
// by the tiles (Bf16Store; the MLP's first one also applies GELU there, its time included), dX =
// dY W rounded (the MLP's dGELU GEMM writes pre in f32), dW = dY^T X rounded with the bias
// gradient's row sums, and the LM head's three, on values scaled as a trained layer's (C about
// N(0, 1)). Per shape its rate (the product's FLOPs) and share of the bf16 peak, then the sum of
// their times for one step (each shape times its count): the GEMMs' part of the step, without the
// rest but GELU.
//
//   build/bench/bench_bf16_gemm [--threads 2] [--repeats 5] [--only gpt2] [--slab-depth 256]
//   build/bench/bench_bf16_gemm --step [--threads 2] [--repeats 9] [--no-backoff]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
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

// One bf16 GEMM of the default model's step (L4 C256, 2048 tokens, vocabulary 65), as
// kernels/cpu/gemm_bf16.cpp calls sgemm_bf16 for it: `count` of them per step.
struct StepGemm {
  const char* what;
  bool ta, tb;
  int m, n, k;
  bool bias, rounded, gelu, row_sums;  // gelu: aux in `rounded`, bf16(gelu) in a second output
  int count;
};
constexpr StepGemm kStepGemms[] = {
    {"qkv fwd     x W^T + b", false, true, 2048, 768, 256, true, true, false, false, 4},
    {"attn proj fwd", false, true, 2048, 256, 256, true, true, false, false, 4},
    {"fc fwd (GELU + aux)", false, true, 2048, 1024, 256, true, true, true, false, 4},
    {"mlp proj fwd", false, true, 2048, 256, 1024, true, true, false, false, 4},
    {"lm head fwd", false, true, 2048, 65, 256, false, true, false, false, 1},
    {"lm head dx  dy W", false, false, 2048, 256, 65, false, true, false, false, 1},
    {"mlp proj dx (dGELU, f32)", false, false, 2048, 1024, 256, false, false, false, false, 4},
    {"fc dx", false, false, 2048, 256, 1024, false, true, false, false, 4},
    {"attn proj dx", false, false, 2048, 256, 256, false, true, false, false, 4},
    {"qkv dx", false, false, 2048, 256, 768, false, true, false, false, 4},
    {"lm head dW  dy^T x", true, false, 65, 256, 2048, false, true, false, false, 1},
    {"mlp proj dW + row sums", true, false, 256, 1024, 2048, false, true, false, true, 4},
    {"fc dW", true, false, 1024, 256, 2048, false, true, false, true, 4},
    {"attn proj dW", true, false, 256, 256, 2048, false, true, false, true, 4},
    {"qkv dW", true, false, 768, 256, 2048, false, true, false, true, 4},
};

double seconds(auto&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --step: each of the step's GEMMs, best of `repeats` timings of enough calls for ~20 ms.
int time_step_gemms(int repeats, double bf16_peak) {
  namespace cpu = glass::kernels::cpu;
  if (!cpu::cpu_has_avx512_bf16()) {
    fmt::print("no AVX512-BF16: the step's GEMMs take the conversion path, not timed here\n");
    return 0;
  }
  fmt::print("{:<26}{:>16}{:>7}{:>11}{:>13}{:>12}\n", "step GEMM", "m x n x k", "count",
             "bf16 GF/s", "% bf16 peak", "ms / step");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  double total_s = 0, total_flops = 0;
  for (const StepGemm& s : kStepGemms) {
    std::vector<glass::bf16> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), out(size_t(s.m) * s.n),
        activated(s.gelu ? size_t(s.m) * s.n : 0);
    for (auto& x : a) x = glass::bf16::from_float(uniform(rng));
    // B scaled so that C's values are about N(0, 1), as a trained layer's are: the GELU row's
    // epilogue on C values of the unscaled N(0, k / 9) went subnormal for C below about -10 and ran
    // 1.4x slower than the step's GELU does
    const float b_scale = 3.0f / std::sqrt(float(s.k));
    for (auto& x : b) x = glass::bf16::from_float(b_scale * uniform(rng));
    std::vector<float> c(size_t(s.m) * s.n), bias(size_t(s.n), 0.25f), sums(size_t(s.m));
    const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const double flops = 2.0 * s.m * s.n * s.k;
    const int calls = std::max(1, int(2e9 / flops));
    const cpu::Bf16Store store{.rounded = s.rounded ? out.data() : nullptr,
                               .ld = s.n,
                               .bias = s.bias ? bias.data() : nullptr,
                               .gelu = s.gelu ? activated.data() : nullptr,
                               .gelu_ld = s.n};
    double best = 1e30;
    for (int r = 0; r < repeats; ++r)
      best =
          std::min(best, seconds([&] {
                     for (int i = 0; i < calls; ++i)
                       cpu::sgemm_bf16(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(),
                                       ldb, 0.0f, c.data(), s.n,
                                       {.a_row_sums = s.row_sums ? sums.data() : nullptr}, store);
                   }));
    const double per_call = best / calls, rate = flops / per_call;
    total_s += per_call * s.count;
    total_flops += flops * s.count;
    fmt::print("{:<26}{:>16}{:>7}{:>11.1f}{:>12.0f}%{:>12.2f}\n", s.what,
               fmt::format("{}x{}x{}", s.m, s.n, s.k), s.count, rate / 1e9, 100 * rate / bf16_peak,
               1e3 * per_call * s.count);
  }
  fmt::print("{:<26}{:>16}{:>7}{:>11.1f}{:>12.0f}%{:>12.2f}\n", "all", "", "",
             total_flops / total_s / 1e9, 100 * total_flops / total_s / bf16_peak, 1e3 * total_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cpu = glass::kernels::cpu;
  int threads = 2, repeats = 5, other_depth = 0;
  bool step = false, no_backoff = false;
  std::string only;
  CLI::App app{"glass bf16 GEMM (vdpbf16ps and the f32 conversion path) against its f32 sgemm"};
  app.add_option("--threads", threads, "glass's threads");
  app.add_option("--repeats", repeats, "best of this many timings per shape and path");
  app.add_option("--only", only, "only the shapes whose name contains this (e.g. gpt2)");
  app.add_option("--slab-depth", other_depth,
                 "also time the bf16 fast path with k slabs of this depth, beside the machine's")
      ->check(CLI::PositiveNumber);
  app.add_flag("--step", step, "time the default model's step GEMMs as the step calls them");
  app.add_flag("--no-backoff", no_backoff,
               "split every product over the threads even on a busy machine (set_busy_backoff)");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_bf16_gemm"))
    return *status;
  cpu::set_threads(threads);
  if (no_backoff) cpu::set_busy_backoff(false);

  const auto peak = cpu::hardware_peak();
  const bool fast = cpu::cpu_has_avx512_bf16();
  // the peak of the cores these threads can use
  const double bf16_peak = peak.bf16_flops() * std::min(threads, peak.cores) / peak.cores;
  fmt::print("threads {}, AVX512-BF16 {}\n", threads, fast ? "yes" : "no (no fast path to time)");
  fmt::print("f32 peak {:.1f} GFLOP/s ({}); bf16 peak {:.1f} GFLOP/s\n", peak.flops() / 1e9,
             peak.derivation(), peak.bf16_flops() / 1e9);
  if (step) return time_step_gemms(repeats, bf16_peak);
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
