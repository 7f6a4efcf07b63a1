// Helpers shared by the nn tests: error capture and scratch files.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/testing.h"

namespace glass::nn_test {

// Runs `f`, expects a glass::Error, and returns its message ("" and a test failure otherwise).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a glass::Error";
  return "";
}

// True when `text` contains every one of `parts`; on failure the message shows the text.
inline ::testing::AssertionResult contains_all(const std::string& text,
                                               std::initializer_list<std::string> parts) {
  for (const std::string& p : parts)
    if (text.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << p << "' not found in: " << text;
  return ::testing::AssertionSuccess();
}

// A directory private to this test process, removed when the process exits.
struct ScratchDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("glass_nn_test_" + std::to_string(::getpid()));
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// A path called `name` in the scratch directory.
inline std::string scratch_path(const std::string& name) {
  static const ScratchDir dir;
  return (dir.path / name).string();
}

}  // namespace glass::nn_test
