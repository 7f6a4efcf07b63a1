// bench_generate: sampling speed with the KV cache, in tokens/s and in GB/s of weights read, next
// to the machine's copy bandwidth measured in the same run.
//
//   build/bench/bench_generate [--tokens 127] [--threads 2] [--repeats 5] [--gpt2-tokens 64]
//                              [--no-gpt2] [--no-bf16] [--full-context]
//
// Decoding one token reads every weight matrix once (2 FLOPs per weight), so its speed is bounded
// by how fast the weights stream: tokens/s x weight bytes = GB/s, against what a copy reaches on
// this machine (a copy of the weights' size, which fits in the last-level cache for the small
// model, and a 256 MiB one from DRAM; both count bytes read plus bytes written).
//
// Models (random weights: the speed does not depend on them):
//   default  train_gpt's default shape (L=4, H=4, C=256, T=128, vocabulary 65), a one-token
//            prompt and --tokens new tokens (127 fill the block), at 1 thread and at --threads,
//            the two interleaved --repeats times (the machine may be shared: the median, min and
//            max are printed, with the load average before and after); then the same in bf16,
//            as a `train_gpt --dtype bf16` model samples (its bf16 weight copies: half the bytes)
//   gpt2     GPT-2 124M (L=12, H=12, C=768, T=1024, vocabulary 50257 padded to 50304) after a
//            prompt encoded with the GPT-2 tokenizer (when its files are there), --gpt2-tokens new
//            tokens at --threads, in f32 and then with bf16 weight copies
// --full-context also times the default model re-running the whole context for every token.
#include <sys/resource.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cpu/threads.h"
#include "kernels/peaks.h"
#include "samples/command_line.h"
#include "train/generate.h"
#include "train/tokenizer/gpt2_tokenizer.h"

namespace {

using namespace glass;

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one.empty() ? "unknown" : one + " " + five + " " + fifteen;
}

// The bytes of weights a token's forward reads: every parameter in the dtype forward reads it in
// (the master's, or its bf16 compute copy's), except that a position table (GPT's wpe) gives one
// row.
double weight_bytes_per_token(const CausalLM& model) {
  double elements = 0;
  for (const auto& [name, p] : model.named_parameters())
    elements += name == "transformer.wpe.weight" ? static_cast<double>(p.size(1))
                                                 : static_cast<double>(p.numel());
  return static_cast<double>(dtype_size(model.compute_dtype())) * elements;
}

// What one generation cost the process: CPU seconds (all threads) and minor page faults.
struct Usage {
  double cpu_s = 0;
  long faults = 0;
  static Usage now() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return {static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec), r.ru_minflt};
  }
};

// Every run's wall-clock tokens/s, and the CPU time and page faults per token.
struct Runs {
  std::vector<double> tokens_per_s, cpu_us_per_token, faults_per_token;
  void add(const train::Generation& g, const Usage& before, const Usage& after) {
    const auto n = static_cast<double>(g.tokens.size());
    tokens_per_s.push_back(g.tokens_per_s());
    cpu_us_per_token.push_back(1e6 * (after.cpu_s - before.cpu_s) / n);
    faults_per_token.push_back(static_cast<double>(after.faults - before.faults) / n);
  }
  static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }
};

train::Generation timed(Runs& runs, CausalLM& model, const std::vector<int32_t>& prompt, int64_t n,
                        const train::SamplingOptions& o) {
  const Usage before = Usage::now();
  train::Generation g = train::generate(model, prompt, n, o, true);
  runs.add(g, before, Usage::now());
  return g;
}

void print_runs(const std::string& what, const Runs& r, double weight_bytes, double copy_bps) {
  const double median = Runs::median(r.tokens_per_s), gbps = median * weight_bytes / 1e9;
  fmt::print(
      "  {}: {:.1f} tokens/s median (min {:.1f}, max {:.1f}, {} runs); weights {:.1f} MB/token -> "
      "{:.2f} GB/s = {:.0f}% of the copy bandwidth; CPU time {:.0f} us/token (all threads), "
      "{:.2f} page faults/token\n",
      what, median, *std::min_element(r.tokens_per_s.begin(), r.tokens_per_s.end()),
      *std::max_element(r.tokens_per_s.begin(), r.tokens_per_s.end()), r.tokens_per_s.size(),
      weight_bytes / 1e6, gbps, 100 * gbps * 1e9 / copy_bps, Runs::median(r.cpu_us_per_token),
      Runs::median(r.faults_per_token));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_generate: KV-cache sampling in tokens/s and GB/s of weights"};
  int64_t n = 127, gpt2_tokens = 64;
  int threads = 2, repeats = 5;
  bool no_gpt2 = false, no_bf16 = false, full_context = false;
  app.add_option("--tokens", n, "new tokens for the default model (127 fill its block of 128)");
  app.add_option("--threads", threads, "cpu threads of the second configuration (the first is 1)");
  app.add_option("--repeats", repeats, "interleaved runs of each configuration");
  app.add_option("--gpt2-tokens", gpt2_tokens, "new tokens for GPT-2 124M");
  app.add_flag("--no-gpt2", no_gpt2, "skip GPT-2 124M");
  app.add_flag("--no-bf16", no_bf16, "skip the bf16 runs (weight copies, as --dtype bf16)");
  app.add_flag("--full-context", full_context, "also time re-running the full context");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_generate"))
    return *status;
  try {
    fmt::print("bench_generate: load average {} at the start\n", load_average());
    Generator gen(1337);
    const GPTConfig small{65, 128, 4, 4, 256, 0};
    const std::unique_ptr<CausalLM> model = make_model(small);
    model->init(gen);
    const double small_bytes = weight_bytes_per_token(*model);
    // The machine's copy bandwidth (kernels/peaks.h: the engine's copy, read + write, best of 3),
    // for a copy of the weights' size and for one from DRAM.
    kernels::cpu::set_threads(threads);
    const double cache_copy =
        kernels::measure_device_peaks(kCPU, 16, static_cast<size_t>(small_bytes)).bytes_per_s;
    const double dram_copy = kernels::measure_device_peaks(kCPU, 16, size_t{256} << 20).bytes_per_s;
    fmt::print(
        "copy bandwidth at {} threads: {:.1f} GB/s for {:.1f} MB (the default model's "
        "weights), {:.1f} GB/s for 256 MiB\n",
        threads, cache_copy / 1e9, small_bytes / 1e6, dram_copy / 1e9);

    const train::SamplingOptions o{1.0, 0, 7};
    // The default model at 1 thread and at --threads, interleaved; full_context also re-runs
    // the whole context for every token.
    const auto default_model = [&](bool with_full_context) {
      const double bytes = weight_bytes_per_token(*model);
      train::generate(*model, {0}, 8, o, true);  // warm-up: allocator, threads
      Runs one, many;
      std::vector<int32_t> first_tokens;
      for (int r = 0; r < repeats; ++r)
        for (Runs* runs : {&one, &many}) {
          kernels::cpu::set_threads(runs == &one ? 1 : threads);
          const train::Generation g = timed(*runs, *model, {0}, n, o);
          if (first_tokens.empty()) first_tokens = g.tokens;
          GLASS_CHECK(g.tokens == first_tokens, "bench_generate: the tokens differ between runs");
        }
      fmt::print(
          "default model (L=4 H=4 C=256 T=128, V=65, {}), {} tokens after 1, KV cache:\n",
          model->compute_dtype() == DType::f32
              ? std::string("f32")
              : fmt::format("{} weight copies of f32 masters, as --dtype {} samples",
                            dtype_name(model->compute_dtype()), dtype_name(model->compute_dtype())),
          n);
      print_runs("1 thread", one, bytes, cache_copy);
      print_runs(fmt::format("{} threads", threads), many, bytes, cache_copy);
      fmt::print("  same tokens at 1 and {} threads: yes\n", threads);
      if (with_full_context) {
        kernels::cpu::set_threads(threads);
        const train::Generation full = train::generate(*model, {0}, n, o, false);
        fmt::print("  full context at {} threads: {:.1f} tokens/s; same tokens as the cache: {}\n",
                   threads, full.tokens_per_s(), full.tokens == first_tokens ? "yes" : "NO");
      }
    };
    default_model(full_context);
    if (!no_bf16) {
      model->set_compute_dtype(DType::bf16);
      default_model(false);
    }

    if (!no_gpt2) {
      kernels::cpu::set_threads(threads);
      GPTConfig config = GPTConfig::gpt2();
      const std::unique_ptr<CausalLM> gpt2 = make_model(config);
      gpt2->init(gen);
      std::vector<int32_t> prompt = {50256};  // <|endoftext|>
      std::string tokenizer = "none (its files are missing; the prompt is <|endoftext|>)";
      std::unique_ptr<train::Gpt2Tokenizer> tok;
      try {
        tok = std::make_unique<train::Gpt2Tokenizer>(
            train::Gpt2Tokenizer::from_dir(train::Gpt2Tokenizer::default_dir()));
        prompt = tok->encode("The quick brown fox jumps over the lazy dog.");
        tokenizer = fmt::format("GPT-2's, {} prompt tokens", prompt.size());
      } catch (const std::exception& e) {
        fmt::print("  (GPT-2 tokenizer: {})\n", e.what());
      }
      // f32, then (unless --no-bf16) with bf16 weight copies
      const auto gpt2_runs = [&] {
        const double gpt2_bytes = weight_bytes_per_token(*gpt2);
        train::generate(*gpt2, prompt, 4, o, true);  // warm-up
        Runs runs;
        size_t decoded_bytes = 0;
        for (int r = 0; r < std::max(1, repeats / 2); ++r) {
          const train::Generation g = timed(runs, *gpt2, prompt, gpt2_tokens, o);
          if (tok) decoded_bytes = tok->decode(g.tokens).size();
        }
        fmt::print("GPT-2 124M ({}, tokenizer: {}), {} tokens, KV cache{}:\n",
                   dtype_name(gpt2->compute_dtype()), tokenizer, gpt2_tokens,
                   tok ? fmt::format(", decoded to {} bytes of text", decoded_bytes) : "");
        print_runs(fmt::format("{} threads", threads), runs, gpt2_bytes, dram_copy);
      };
      gpt2_runs();
      if (!no_bf16) {
        gpt2->set_compute_dtype(DType::bf16);
        gpt2_runs();
      }
    }
    fmt::print("bench_generate: load average {} at the end\n", load_average());
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_generate: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
