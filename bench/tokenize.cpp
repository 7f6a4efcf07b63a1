// bench_tokenize: GPT-2 encoding speed on one thread.
//
//   build/bench/bench_tokenize [--text FILE]
//
// Encodes FILE (default: Tiny Shakespeare, 1.1 MB) with GPT-2's tokenizer twice: with an empty
// piece cache (first pass) and with the cache filled (second pass); MB/s each.
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "samples/command_line.h"
#include "train/tokenizer/gpt2_tokenizer.h"

int main(int argc, char** argv) {
  using namespace glass;
  CLI::App app{"bench_tokenize: GPT-2 encode MB/s"};
  std::string text_path = std::string(GLASS_SOURCE_DIR) + "/data/tinyshakespeare.txt";
  app.add_option("--text", text_path, "text to encode");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_tokenize"))
    return *status;
  try {
    std::ifstream in(text_path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const train::Gpt2Tokenizer tok =
        train::Gpt2Tokenizer::from_dir(train::Gpt2Tokenizer::default_dir());
    for (const char* pass : {"empty cache", "warm cache "}) {
      const auto t0 = std::chrono::steady_clock::now();
      const size_t ids = tok.encode(text).size();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("encode ({}): {:.2f} MB -> {} tokens in {:.3f} s = {:.2f} MB/s\n", pass,
                 static_cast<double>(text.size()) / 1e6, ids, s,
                 static_cast<double>(text.size()) / 1e6 / s);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_tokenize: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
