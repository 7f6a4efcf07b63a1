// bench_generate: generation with the KV cache against re-running the full context.
//
//   build/bench/bench_generate [--tokens 128] [--threads 1]
//
// Generates --tokens tokens after a one-token prompt with the default train_gpt model shape (L=4,
// H=4, C=256, T=128, vocabulary 65, random weights: the speed does not depend on them) on cpu,
// once with the KV cache and once re-running the whole context; tokens/s each, the ratio, and
// whether both drew the same tokens.
#include <CLI/CLI.hpp>

#include "kernels/cpu/threads.h"
#include "samples/command_line.h"
#include "train/generate.h"

int main(int argc, char** argv) {
  using namespace glass;
  CLI::App app{"bench_generate: KV cache vs full-context tokens/s"};
  int64_t n = 128;
  int threads = 1;
  app.add_option("--tokens", n, "tokens to generate (128 = the model's block size)");
  app.add_option("--threads", threads, "cpu threads");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_generate"))
    return *status;
  try {
    kernels::cpu::set_threads(threads);
    Generator gen(1337);
    GPT model(GPTConfig{65, 128, 4, 4, 256, 0});
    model.init(gen);
    const train::SamplingOptions o{1.0, 0, 7};
    train::generate(model, {0}, 8, o, true);  // warm-up: allocator, BLAS threads
    const train::Generation kv = train::generate(model, {0}, n, o, true);
    const train::Generation full = train::generate(model, {0}, n, o, false);
    fmt::print(
        "generate {} tokens (L=4 H=4 C=256 T=128, cpu, {} threads): KV cache {:.1f} tokens/s, "
        "full context {:.1f} tokens/s, KV / full = {:.2f}x, same tokens: {}\n",
        n, threads, kv.tokens_per_s(), full.tokens_per_s(), kv.tokens_per_s() / full.tokens_per_s(),
        kv.tokens == full.tokens ? "yes" : "NO");
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_generate: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
