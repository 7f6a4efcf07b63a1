// prepare_data: text files -> llm.c token shards of GPT-2 tokens, for train_gpt --data DIR.
//
//   build/samples/prepare_data --input a.txt b.txt --out DIR [--val-fraction 0.1]
//                              [--shard-tokens N] [--tokenizer gpt2]
//
// Each input file is one document; every document is preceded by <|endoftext|> (50256), as llm.c
// does, so documents are separated by it. The last --val-fraction of the tokens go to the val
// shards (DIR/val_000000.bin, ...), the rest to DIR/train_000000.bin, ...; each shard holds at
// most --shard-tokens tokens (header: magic 20240520, version 1, count; then uint16 tokens).
// DIR/gpt2_tokenizer.bin (llm.c's decode table) lets train_gpt decode samples of these tokens.
// Prints a progress bar on stderr and a summary. Errors: one line, "prepare_data: error: ...".
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/atomic_file.h"
#include "engine/error.h"
#include "samples/command_line.h"
#include "train/data.h"
#include "train/tokenizer/gpt2_tokenizer.h"
#include "train/tokenizer/pretokenize.h"

namespace {

using glass::train::Gpt2Tokenizer;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GLASS_CHECK(in.good(), "cannot open input '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "[#########...........]  45%  1.2/2.6 MB  3.1 MB/s" on one line, redrawn in place.
void progress_bar(double done, double total, double seconds) {
  constexpr int kWidth = 30;
  const double f = total > 0 ? done / total : 1.0;
  const int filled = static_cast<int>(f * kWidth);
  fmt::print(stderr, "\r[{}{}] {:3.0f}%  {:.1f}/{:.1f} MB  {:.1f} MB/s", std::string(filled, '#'),
             std::string(kWidth - filled, '.'), 100 * f, done / 1e6, total / 1e6,
             seconds > 0 ? done / 1e6 / seconds : 0.0);
  std::fflush(stderr);
}

// Writes `tokens` as shards DIR/<split>_000000.bin, ... of at most `per_shard` tokens each.
int64_t write_shards(const std::string& dir, const std::string& split,
                     const std::vector<int32_t>& tokens, int64_t per_shard) {
  int64_t shards = 0;
  for (size_t at = 0; at < tokens.size(); at += static_cast<size_t>(per_shard), ++shards) {
    const size_t end = std::min(tokens.size(), at + static_cast<size_t>(per_shard));
    glass::train::write_shard(
        fmt::format("{}/{}_{:06d}.bin", dir, split, shards),
        std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                             tokens.begin() + static_cast<std::ptrdiff_t>(end)));
  }
  return shards;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"prepare_data: text files -> llm.c shards of GPT-2 tokens"};
  glass::samples::describe_program(
      app, "README.md (\"GPT-2 tokens: prepare_data, sampling, generate\")");
  std::vector<std::string> inputs;
  std::string out, tokenizer = "gpt2", vocab_dir;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;
  app.add_option("--input", inputs, "text files, one document each")->required();
  app.add_option("--out", out, "directory for the shards")->required();
  app.add_option("--val-fraction", val_fraction,
                 "the last fraction of the tokens held out (0: none)");
  app.add_option("--shard-tokens", shard_tokens, "most tokens per shard");
  app.add_option("--tokenizer", tokenizer, "gpt2 (GPT-2's byte-level BPE)")
      ->check(CLI::IsMember({"gpt2"}));
  app.add_option("--vocab-dir", vocab_dir,
                 "directory of encoder.json and vocab.bpe (default: $GLASS_GPT2_VOCAB_DIR or the "
                 "npm package scripts/setup.sh fetched)");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "prepare_data"))
    return *status;
  try {
    GLASS_CHECK(val_fraction >= 0 && val_fraction < 1, "--val-fraction {} is not in [0, 1)",
                val_fraction);
    GLASS_CHECK(shard_tokens > 0 && shard_tokens <= INT32_MAX,
                "--shard-tokens {} is not in [1, 2^31 - 1] (the header's int32 count)",
                shard_tokens);
    const auto t0 = std::chrono::steady_clock::now();
    // The inputs first (the arguments a user mistypes), then the vocabulary they are encoded with.
    double total_bytes = 0;
    for (const auto& f : inputs) {
      std::error_code ec;
      const auto size = std::filesystem::file_size(f, ec);
      GLASS_CHECK(!ec, "cannot read input '{}': {}", f, ec.message());
      // An empty document would add only its <|endoftext|>: shards with nothing to learn from.
      GLASS_CHECK(size > 0, "input '{}' is empty (0 bytes): there is nothing to tokenize", f);
      total_bytes += static_cast<double>(size);
    }
    const Gpt2Tokenizer tok =
        Gpt2Tokenizer::from_dir(vocab_dir.empty() ? Gpt2Tokenizer::default_dir() : vocab_dir);
    std::filesystem::create_directories(out);

    // Encode each document in chunks of about 1 MB, cut where the pieces do not change
    // (gpt2_safe_cut), so that the bar moves and the result is that of one encode.
    std::vector<int32_t> tokens;
    double done = 0;
    const auto seconds = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (const auto& f : inputs) {
      const std::string text = read_file(f);
      tokens.push_back(tok.end_of_text());
      for (size_t at = 0; at < text.size();) {
        const size_t cut = glass::train::gpt2_safe_cut(text, at + (1 << 20));
        const auto ids = tok.encode(std::string_view(text).substr(at, cut - at));
        tokens.insert(tokens.end(), ids.begin(), ids.end());
        done += static_cast<double>(cut - at);
        at = cut;
        progress_bar(done, total_bytes, seconds());
      }
    }
    progress_bar(total_bytes, total_bytes, seconds());
    fmt::print(stderr, "\n");

    const auto n_val = static_cast<size_t>(static_cast<double>(tokens.size()) * val_fraction);
    const std::vector<int32_t> val(tokens.end() - static_cast<std::ptrdiff_t>(n_val), tokens.end());
    tokens.resize(tokens.size() - n_val);
    // Shards of an earlier run would be read with these: start from an empty set.
    for (const auto& e : std::filesystem::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      if (e.path().extension() == ".bin" &&
          (name.rfind("train_", 0) == 0 || name.rfind("val_", 0) == 0))
        std::filesystem::remove(e.path());
    }
    const int64_t train_shards = write_shards(out, "train", tokens, shard_tokens);
    const int64_t val_shards = write_shards(out, "val", val, shard_tokens);
    glass::write_file_atomic(out + "/gpt2_tokenizer.bin",
                             glass::train::llmc_tokenizer_bytes(tok.tokens(), tok.end_of_text()));
    fmt::print(
        "prepare_data: {} documents, {} tokens ({} train, {} val) in {} shards ({} train, {} val) "
        "-> {} | {:.1f} MB of text in {:.2f} s ({:.1f} MB/s)\n",
        inputs.size(), tokens.size() + val.size(), tokens.size(), val.size(),
        train_shards + val_shards, train_shards, val_shards, out, total_bytes / 1e6, seconds(),
        total_bytes / 1e6 / seconds());
  } catch (const std::exception& e) {
    fmt::print(stderr, "prepare_data: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
