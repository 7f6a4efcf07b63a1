// The stop handlers (train/shutdown.h) in a child process: the first SIGINT/SIGTERM is recorded
// and the process carries on; a second one ends it at once with 128 + the signal number.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "train/shutdown.h"

namespace glass::train {
namespace {

// Forks; the child installs the handlers and raises `first` then `second` (0 = none), reporting
// through its exit status: 10 + stop_signal() when it is still alive after both.
int child_status(int first, int second) {
  const pid_t pid = fork();
  if (pid == 0) {
    install_stop_handlers();
    if (stop_signal() != 0) _exit(1);
    raise(first);
    if (stop_signal() != first) _exit(2);
    if (second) raise(second);
    _exit(10 + stop_signal());
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
}

TEST(Shutdown, FirstSignalIsRecordedNotFatal) {
  EXPECT_EQ(child_status(SIGINT, 0), 10 + SIGINT);
  EXPECT_EQ(child_status(SIGTERM, 0), 10 + SIGTERM);
}

TEST(Shutdown, SecondSignalExitsAtOnce) {
  EXPECT_EQ(child_status(SIGINT, SIGINT), 130);
  EXPECT_EQ(child_status(SIGTERM, SIGTERM), 143);
  EXPECT_EQ(child_status(SIGINT, SIGTERM), 143);
}

TEST(Shutdown, Names) {
  EXPECT_STREQ(stop_signal_name(SIGINT), "SIGINT");
  EXPECT_STREQ(stop_signal_name(SIGTERM), "SIGTERM");
}

}  // namespace
}  // namespace glass::train
