// bench_thread_grain: below how much work a cpu kernel's loop should not be split over the threads
// (kernels/cpu/threads.h). For loops shaped like the kernels' (an elementwise add: 12 bytes and 1
// FLOP per element; an exp per element, as softmax and GELU; an AdamW update: 16 bytes and ~15
// FLOPs per element; glass's sgemm), it times the loop on one thread and split over `--threads`,
// for sizes in powers of two, interleaved, the median of `--repeats`, and prints the ratio.
// The split pays when the work on one thread exceeds about twice the pool's fork-join cost, so it
// also prints that cost (an empty loop of 8 chunks, back to back and after the workers fell asleep)
// and the break-even it implies for each loop: 2 x cost / (time per element on one thread).
// The kernels' thresholds (kParallelGrain in kernels/cpu/cpu.h, kParallelFlops in sgemm.cpp) are
// set from these figures (bench/RESULTS.md).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/sgemm.h"
#include "kernels/cpu/threads.h"
#include "samples/command_line.h"

namespace cpu = glass::kernels::cpu;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of `repeats` timings of fn (after 2 untimed runs), `pause` seconds slept before
// each timing (0: back to back).
double median_seconds(int repeats, double pause, const std::function<void()>& fn) {
  fn();
  fn();
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    if (pause > 0) std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    const double t0 = now_s();
    fn();
    t.push_back(now_s() - t0);
  }
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

struct Loop {
  const char* name;
  std::function<void(int64_t n, bool parallel)> run;  // one pass over n elements
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 201;
  CLI::App app{"bench_thread_grain: where splitting a cpu loop over the threads starts to pay"};
  app.add_option("--threads", threads, "threads of the split runs");
  app.add_option("--repeats", repeats, "timings per point (the median is shown)");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_thread_grain"))
    return *status;

  constexpr int64_t kMax = int64_t{1} << 20;
  std::vector<float> a(kMax, 1.0f), b(kMax, 0.5f), c(kMax), m(kMax, 0.1f), v(kMax, 0.2f);
  const std::vector<Loop> loops = {
      {"add (12 B, 1 FLOP / elem)",
       [&](int64_t n, bool par) {
         cpu::parallel_ranges(
             n, par,
             [&](int64_t lo, int64_t hi) {
               for (int64_t i = lo; i < hi; ++i) c[i] = a[i] + b[i];
             },
             cpu::kRowLanes);
       }},
      {"exp (8 B, ~20 FLOP / elem)",
       [&](int64_t n, bool par) {
         cpu::parallel_ranges(
             n, par,
             [&](int64_t lo, int64_t hi) {
               for (int64_t i = lo; i < hi; ++i) c[i] = cpu::exp_vectorisable(a[i] - b[i]);
             },
             cpu::kRowLanes);
       }},
      {"adamw (16 B, ~15 FLOP / elem)",
       [&](int64_t n, bool par) {
         cpu::parallel_ranges(
             n, par,
             [&](int64_t lo, int64_t hi) {
#pragma omp simd
               for (int64_t i = lo; i < hi; ++i) {
                 m[i] = 0.9f * m[i] + 0.1f * b[i];
                 v[i] = 0.95f * v[i] + 0.05f * b[i] * b[i];
                 a[i] -= 1e-3f * (m[i] / (std::sqrt(v[i]) + 1e-8f) + 0.1f * a[i]);
               }
             },
             cpu::kRowLanes);
       }},
  };

  cpu::set_threads(threads);
  // every split measured as a split, busy machine or not (the back-off would run it alone)
  cpu::set_busy_backoff(false);
  fmt::print("bench_thread_grain: {} threads, median of {} timings per point\n", threads, repeats);
  // 1. the pool's own cost: an empty loop of 8 chunks
  const auto empty = [] { cpu::parallel_chunks(8, [](int64_t) {}); };
  const double hot = median_seconds(repeats, 0, empty);
  const double cold = median_seconds(std::min(repeats, 41), 2e-3, empty);
  fmt::print(
      "fork-join of an empty 8-chunk loop: {:.2f} us back to back, {:.2f} us after 2 ms "
      "idle (workers asleep)\n",
      hot * 1e6, cold * 1e6);
  const cpu::ThreadStats stats = cpu::thread_stats();
  fmt::print("(loops split so far: {})\n\n", stats.parallel_loops);

  // 2. each loop on one thread and split, sizes in powers of two
  for (const Loop& loop : loops) {
    fmt::print("{}\n{:>10}{:>14}{:>14}{:>10}\n", loop.name, "elements", "1 thread us",
               fmt::format("{} threads us", threads), "speed-up");
    double per_elem = 0;
    int64_t first_win = 0;
    for (int64_t n = 1024; n <= kMax; n *= 2) {
      const double one = median_seconds(repeats, 0, [&] { loop.run(n, false); });
      const double split = median_seconds(repeats, 0, [&] { loop.run(n, true); });
      if (n == kMax) per_elem = one / static_cast<double>(n);
      if (!first_win && split < one) first_win = n;
      fmt::print("{:>10}{:>14.2f}{:>14.2f}{:>9.2f}x\n", n, one * 1e6, split * 1e6, one / split);
    }
    fmt::print(
        "first size the split wins: {}; break-even from the fork-join cost: 2 x {:.2f} us "
        "/ {:.3f} ns per element = {:.0f} elements (workers asleep: {:.0f})\n\n",
        first_win, hot * 1e6, per_elem * 1e9, 2 * hot / per_elem, 2 * cold / per_elem);
  }

  // 3. sgemm: its own split (kParallelFlops) at 1 thread and at `threads`, square products
  fmt::print("sgemm n^3 (its split starts at 4 MFLOP)\n{:>6}{:>10}{:>14}{:>14}{:>10}\n", "n",
             "MFLOP", "1 thread us", fmt::format("{} threads us", threads), "speed-up");
  for (int n : {64, 96, 128, 160, 192, 256, 384}) {
    std::vector<float> x(static_cast<size_t>(n) * n, 1.0f), y = x, z = x;
    const auto product = [&] {
      cpu::sgemm(false, false, n, n, n, 1.0f, x.data(), n, y.data(), n, 0.0f, z.data(), n);
    };
    cpu::set_threads(1);
    const double one = median_seconds(repeats, 0, product);
    cpu::set_threads(threads);
    const double split = median_seconds(repeats, 0, product);
    fmt::print("{:>6}{:>10.2f}{:>14.2f}{:>14.2f}{:>9.2f}x\n", n, 2e-6 * n * n * n, one * 1e6,
               split * 1e6, one / split);
  }
  const cpu::ThreadStats end = cpu::thread_stats();
  fmt::print(
      "\nbusy loops seen during the run: {} (a busy machine makes every split figure "
      "pessimistic)\n",
      end.busy_loops);
  return 0;
}
