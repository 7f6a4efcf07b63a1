#include "train/shutdown.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace glass::train {

namespace {

std::atomic<int> requested{0};

extern "C" void on_stop_signal(int sig) {
  // 1. A second signal: the user does not want to wait for the step or the checkpoint.
  int none = 0;
  if (!requested.compare_exchange_strong(none, sig)) ::_exit(128 + sig);
  // 2. The first one is only recorded; the loop stops after the current step.
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read or write in progress carries on rather than failing
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return requested.load(std::memory_order_relaxed); }

void clear_stop_signal() { requested.store(0); }

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "a signal";
  }
}

}  // namespace glass::train
