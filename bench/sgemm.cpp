// bench_sgemm: glass's own f32 GEMM (kernels/cpu/sgemm.cpp) against OpenBLAS's cblas_sgemm, on
// the GEMM shapes of one training step of the default model (L4 H4 C256 T128 B16: 2048 tokens)
// and a square 512^3, in one run. The two alternate, best of --repeats each, same threads; also
// prints the OpenBLAS kernel in use (it follows OPENBLAS_CORETYPE and the CPU model) and the
// hardware peak the MFU uses. --slab-depth N also times glass with k slabs of N (sgemm.h's
// set_sgemm_slab_depth), interleaved with the machine's own depth, for comparing blockings on
// the same machine load.
//
//   build/bench/bench_sgemm [--threads 2] [--repeats 7] [--only dW] [--slab-depth 256]
#include <cblas.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/cpu/hardware_peak.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/threads.h"
#include "samples/command_line.h"

extern "C" char* openblas_get_corename();

namespace {

struct Shape {
  const char* what;
  bool ta, tb;
  int m, n, k;
};

// y = x W^T is (tokens x in) (out x in)^T; dx = dy W; dW = dy^T x. Attention: one (batch, head).
constexpr Shape kShapes[] = {
    {"qkv forward  x W^T", false, true, 2048, 768, 256},
    {"fc forward   x W^T", false, true, 2048, 1024, 256},
    {"proj forward x W^T", false, true, 2048, 256, 1024},
    {"qkv dx       dy W", false, false, 2048, 256, 768},
    {"fc dx        dy W", false, false, 2048, 256, 1024},
    {"mlp proj dx  dy W", false, false, 2048, 1024, 256},
    {"qkv dW       dy^T x", true, false, 768, 256, 2048},
    {"attn proj dW dy^T x", true, false, 256, 256, 2048},
    {"fc dW        dy^T x", true, false, 1024, 256, 2048},
    {"mlp proj dW  dy^T x", true, false, 256, 1024, 2048},
    {"lm head      x wte^T", false, true, 2048, 65, 256},
    {"attn S = Q K^T", false, true, 128, 128, 64},
    {"attn O = P V", false, false, 128, 64, 128},
    {"square 512^3", false, false, 512, 512, 512},
};

double seconds(auto&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 7, other_depth = 0;
  std::string only;
  CLI::App app{"glass sgemm against OpenBLAS cblas_sgemm"};
  app.add_option("--threads", threads, "glass's (and OpenBLAS's) threads");
  app.add_option("--repeats", repeats, "best of this many timings per shape and system");
  app.add_option("--only", only, "only the shapes whose name contains this (e.g. dW)");
  app.add_option("--slab-depth", other_depth,
                 "also time glass with k slabs of this depth, beside the machine's own")
      ->check(CLI::PositiveNumber);
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_sgemm"))
    return *status;
  glass::kernels::cpu::set_threads(threads);  // glass's pool and OpenBLAS's threads alike

  const auto blocking = glass::kernels::cpu::sgemm_blocking();
  const auto peak = glass::kernels::cpu::hardware_peak();
  fmt::print(
      "threads {}, OpenBLAS kernel {}, glass tile {}x{} in {} ({}-bit vectors), KC {} MC {} NC "
      "{}\n",
      threads, openblas_get_corename(), blocking.mr, blocking.nr, blocking.passes,
      blocking.vector_bits, blocking.kc, blocking.mc, blocking.nc);
  fmt::print("hardware peak {:.1f} GFLOP/s ({})\n", peak.flops() / 1e9, peak.derivation());
  const std::string other_column = fmt::format("KC {} GF/s", other_depth);
  fmt::print("{:<22}{:>16}{:>14}{:>14}{:>9}{:>16}\n", "shape", "m x n x k", "glass GF/s",
             "OpenBLAS GF/s", "ratio", other_depth ? other_column : "");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (const Shape& s : kShapes) {
    if (std::string_view(s.what).find(only) == std::string_view::npos) continue;
    // stored sizes: A is m x k (k x m transposed), B k x n (n x k), C m x n
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
    for (float& x : a) x = uniform(rng);
    for (float& x : b) x = uniform(rng);
    const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    // enough calls per timing for ~20 ms of work at 100 GFLOP/s
    const double flops = 2.0 * s.m * s.n * s.k;
    const int calls = std::max(1, int(2e9 / flops));
    auto ours = [&] {
      for (int i = 0; i < calls; ++i)
        glass::kernels::cpu::sgemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb,
                                   0.0f, c.data(), s.n);
    };
    auto theirs = [&] {
      for (int i = 0; i < calls; ++i)
        cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans,
                    s.tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(),
                    ldb, 0.0f, c.data(), s.n);
    };
    double t_ours = 1e30, t_theirs = 1e30, t_other = 1e30;
    for (int r = 0; r < repeats; ++r) {  // alternate, so all see the same machine load
      t_ours = std::min(t_ours, seconds(ours));
      t_theirs = std::min(t_theirs, seconds(theirs));
      // OpenBLAS's pthreads spin for a while after each call (2^28 cycles by default, its
      // THREAD_TIMEOUT): timed at once, glass's pool finds its worker's core taken and backs off
      // to one thread, as on a busy machine. The pause lets them sleep first (bench/RESULTS.md,
      // 2026-12-07: glass's 2-thread mean rose from 0.61-0.62x to 0.67-0.71x OpenBLAS's).
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (!other_depth) continue;
      glass::kernels::cpu::set_sgemm_slab_depth(other_depth);
      t_other = std::min(t_other, seconds(ours));
      glass::kernels::cpu::set_sgemm_slab_depth(0);
    }
    const auto rate = [&](double t) { return flops * calls / t / 1e9; };
    fmt::print("{:<22}{:>16}{:>14.1f}{:>14.1f}{:>8.2f}x{:>16}\n", s.what,
               fmt::format("{}x{}x{}", s.m, s.n, s.k), rate(t_ours), rate(t_theirs),
               t_theirs / t_ours, other_depth ? fmt::format("{:.1f}", rate(t_other)) : "");
  }
}
