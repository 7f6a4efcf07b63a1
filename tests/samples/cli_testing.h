// Running the built sample programs from tests: exit status and output, scratch paths, and the
// one-line error convention every sample follows.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace glass::testing {

struct Outcome {
  int status = 0;
  std::string out;  // stdout and stderr together
};

// Runs build/samples/<program> with `args` (a shell command line fragment).
inline Outcome run_sample(const std::string& program, const std::string& args) {
  const std::string cmd =
      std::string(GLASS_BINARY_DIR) + "/samples/" + program + " " + args + " 2>&1";
  Outcome r;
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A path in this process's scratch directory.
inline std::string scratch_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("glass_cli_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// The run failed with one line, "<program>: error: ...", that contains `fragment`.
inline void expect_one_line_error(const std::string& program, const std::string& args,
                                  const std::string& fragment) {
  const Outcome r = run_sample(program, args);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind(program + ": error:", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(fragment), std::string::npos)
      << "missing '" << fragment << "' in: " << r.out;
}

}  // namespace glass::testing
