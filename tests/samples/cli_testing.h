// Running the built sample programs from tests: exit status and output, and the
// one-line error convention every sample follows.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/testing.h"  // scratch_path, file_bytes

namespace glass::testing {

// A model small enough for a test to train a step of in well under a second, one thread, no
// sampling and one evaluation batch; `--data` and the step count are the caller's.
inline const std::string kTinyRunFlags =
    "--n-layer 1 --n-head 2 --n-embd 16 --seq-len 8 --batch 2 "
    "--sample 0 --eval-every 0 --eval-batches 1 --threads 1 ";

struct Outcome {
  int status = 0;
  std::string out;  // stdout and stderr together
};

// Runs a shell command line: its exit status and its output (stdout and stderr together).
inline Outcome run_command(const std::string& command) {
  Outcome r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Runs build/samples/<program> with `args` (a shell command line fragment).
inline Outcome run_sample(const std::string& program, const std::string& args) {
  return run_command(std::string(GLASS_BINARY_DIR) + "/samples/" + program + " " + args);
}

// Starts build/samples/<program> with `args` (no shell), its stdout and stderr appended to `log`,
// and returns at once with its pid.
inline pid_t spawn_sample(const std::string& program, const std::vector<std::string>& args,
                          const std::string& log) {
  const std::string exe = std::string(GLASS_BINARY_DIR) + "/samples/" + program;
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {  // only async-signal-safe calls between fork and exec
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid`: its exit status, or minus the signal that ended it.
inline int wait_status(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
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
