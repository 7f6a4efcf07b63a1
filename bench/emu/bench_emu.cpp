// What the emulator costs: the same work as a plain host loop and as an emu launch, in ns per
// element. Emu runs use one worker thread, so the ratio is per core.
//
//   gelu:    elementwise, no barriers: the lazy scheduler runs each block as a plain loop.
//   softmax: one 256-thread block per 1024-wide row; 4 barriers and 20 shuffles per thread.
//   barrier, shuffle: the cost of one __syncthreads() / __shfl_xor_sync() per CUDA thread, in
//   256-thread blocks (ns_per_element counts thread-operations).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "bench/emu/kernels.h"
#include "engine/emu/launch.h"
#include "engine/emu/settings.h"

namespace {

constexpr int kGeluN = 1 << 22;
constexpr int kRows = 1024, kCols = 1024, kSoftmaxBlock = 256;

std::vector<float> random_values(size_t n) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

float gelu_ref(float x) {
  return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
}

void softmax_ref(const float* x, float* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<size_t>(r) * cols;
    float* out = y + static_cast<size_t>(r) * cols;
    float m = -INFINITY, s = 0.0f;
    for (int c = 0; c < cols; ++c) m = std::fmax(m, row[c]);
    for (int c = 0; c < cols; ++c) s += std::exp(row[c] - m);
    for (int c = 0; c < cols; ++c) out[c] = std::exp(row[c] - m) / s;
  }
}

void one_worker_thread() {
  glass::emu::Settings s = glass::emu::settings();
  s.worker_threads = 1;
  glass::emu::set_settings(s);
}

void per_element(benchmark::State& state, size_t elements) {
  state.counters["ns_per_element"] =
      benchmark::Counter(static_cast<double>(elements) * state.iterations(),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_GeluHostLoop(benchmark::State& state) {
  const std::vector<float> x = random_values(kGeluN);
  std::vector<float> y(kGeluN);
  for (auto _ : state) {
    for (int i = 0; i < kGeluN; ++i) y[i] = gelu_ref(x[i]);
    benchmark::DoNotOptimize(y.data());
  }
  per_element(state, kGeluN);
}

void BM_GeluEmu(benchmark::State& state) {
  one_worker_thread();
  const std::vector<float> x = random_values(kGeluN);
  std::vector<float> y(kGeluN);
  for (auto _ : state)
    glass::emu::launch_kernel("gelu", gelu_kernel, dim3(kGeluN / 256), dim3(256), 0, x.data(),
                              y.data(), kGeluN);
  per_element(state, kGeluN);
}

void BM_SoftmaxHostLoop(benchmark::State& state) {
  const std::vector<float> x = random_values(size_t{kRows} * kCols);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    softmax_ref(x.data(), y.data(), kRows, kCols);
    benchmark::DoNotOptimize(y.data());
  }
  per_element(state, x.size());
}

void BM_SoftmaxEmu(benchmark::State& state) {
  one_worker_thread();
  const std::vector<float> x = random_values(size_t{kRows} * kCols);
  std::vector<float> y(x.size());
  for (auto _ : state)
    glass::emu::launch_kernel("softmax", softmax_kernel, dim3(kRows), dim3(kSoftmaxBlock), 0,
                              x.data(), y.data(), kCols);
  per_element(state, x.size());
}

constexpr int kOpBlocks = 256, kOpIterations = 64;

// Per thread-operation, including 1/64 of starting the thread.
template <void (*Kernel)(float*, int)>
void BM_PerThreadOp(benchmark::State& state) {
  one_worker_thread();
  std::vector<float> out(kOpBlocks);
  for (auto _ : state)
    glass::emu::launch_kernel("op", Kernel, dim3(kOpBlocks), dim3(256), 0, out.data(),
                              kOpIterations);
  per_element(state, size_t{kOpBlocks} * 256 * kOpIterations);
}

}  // namespace

BENCHMARK(BM_GeluHostLoop)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluEmu)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxHostLoop)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SoftmaxEmu)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PerThreadOp<barrier_loop>)->Name("BM_Barrier")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PerThreadOp<shuffle_loop>)->Name("BM_Shuffle")->Unit(benchmark::kMillisecond);
