// bench_thread_scaling: the speed-up of a training step at N threads over 1 thread, measured in
// one process with the thread count alternated step by step (1, N, N, 1, 1, N, ...).
//
// Why in one process: on a shared or virtual machine the host moves the cores' clock from minute
// to minute (bench/RESULTS.md: the dependent-add chain read 4.04 GHz and, eight minutes later,
// 3.3-3.4 GHz, nothing of ours running), so two processes run one after the other (as
// bench/contention.sh's idle phase does) compare two different machines as much as two thread
// counts. Adjacent steps, a few hundred milliseconds apart, see the same clock; the pair order
// alternates so that a drift during a pair favours neither count. Each pair gives one ratio
// (1-thread ms / N-thread ms); the median over the pairs is the speed-up.
//
//   bench_thread_scaling [--pairs 10] [--warm-steps 2] [--compare-threads 2] [any train_gpt flag]
// Default: train_gpt's default model on cpu (L=4 H=4 C=256 T=128 B=16), f32.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <vector>

#include "kernels/cpu/threads.h"
#include "samples/train_gpt_flags.h"
#include "train/trainer.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  glass::train::TrainOptions options;
  options.sample = 0;
  options.eval_every = 0;
  int pairs = 10, warmup = 2, threads = 2;
  CLI::App app{"A training step at N threads against 1, alternated step by step in one process"};
  glass::samples::add_train_gpt_flags(app, options);
  app.add_option("--pairs", pairs, "pairs of steps (one at 1 thread, one at N)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warm-steps", warmup, "steps at each count before the pairs")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--compare-threads", threads, "N, the thread count compared with 1")
      ->check(CLI::Range(2, 1024));
  CLI11_PARSE(app, argc, argv);
  options.steps = 2 * (warmup + pairs);
  options.quiet = true;

  namespace cpu = glass::kernels::cpu;
  glass::train::Trainer trainer(options);
  const auto step_at = [&](int count) {
    cpu::set_threads(count);
    return trainer.train_step().ms;
  };
  for (int i = 0; i < warmup; ++i) step_at(1), step_at(threads);

  std::vector<double> one, many, ratios;
  for (int p = 0; p < pairs; ++p) {
    const bool one_first = p % 2 == 0;
    const double first = step_at(one_first ? 1 : threads),
                 second = step_at(one_first ? threads : 1);
    one.push_back(one_first ? first : second);
    many.push_back(one_first ? second : first);
    ratios.push_back(one.back() / many.back());
  }
  fmt::print("{} pairs of steps, 1 thread and {} threads alternated in one process\n", pairs,
             threads);
  fmt::print("{:>6} {:>12} {:>12} {:>9}\n", "pair", "1 thread ms",
             fmt::format("{} thr ms", threads), "speed-up");
  for (int p = 0; p < pairs; ++p)
    fmt::print("{:>6} {:>12.1f} {:>12.1f} {:>8.2f}x\n", p + 1, one[p], many[p], ratios[p]);
  fmt::print(
      "median {:>12.1f} {:>12.1f} {:>8.2f}x  (median of the pairs' ratios; min {:.2f}x, "
      "max {:.2f}x)\n",
      median(one), median(many), median(ratios), *std::min_element(ratios.begin(), ratios.end()),
      *std::max_element(ratios.begin(), ratios.end()));
  return 0;
}
