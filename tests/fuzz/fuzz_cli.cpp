// Fuzz target: train_gpt's command line (samples/train_gpt_flags.h). The input is split at NUL
// bytes into arguments; CLI11 must parse them or throw its ParseError (which train_gpt prints as
// one line), never crash.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "samples/train_gpt_flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"train_gpt"};
  std::string current;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  if (!current.empty()) args.push_back(current);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());

  CLI::App app{"train_gpt"};
  glass::train::TrainOptions options;
  glass::samples::add_train_gpt_flags(app, options);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
