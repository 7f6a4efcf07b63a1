// What the launch gateway itself costs: ns per glass::launch of an empty kernel, with no observer
// subscribed (the fast path every training step takes) and with one that does nothing (the
// price of a time stamp pair, the std::function and the observer calls). Compare the first with a
// CUDA kernel launch (several µs) to see that an unwatched gateway is free in practice.
#include <benchmark/benchmark.h>

#include "engine/launch.h"

namespace {

glass::LaunchInfo empty_kernel_info() {
  glass::LaunchInfo info;
  info.kernel = "empty";
  return info;
}

void BM_LaunchNoObserver(benchmark::State& state) {
  const glass::LaunchInfo info = empty_kernel_info();
  int calls = 0;
  for (auto _ : state) glass::launch(info, [&] { benchmark::DoNotOptimize(++calls); });
}
BENCHMARK(BM_LaunchNoObserver);

struct NullObserver : glass::LaunchObserver {};

void BM_LaunchWithObserver(benchmark::State& state) {
  const glass::LaunchInfo info = empty_kernel_info();
  NullObserver obs;
  glass::subscribe(&obs);
  int calls = 0;
  for (auto _ : state) glass::launch(info, [&] { benchmark::DoNotOptimize(++calls); });
  glass::unsubscribe(&obs);
}
BENCHMARK(BM_LaunchWithObserver);

}  // namespace
