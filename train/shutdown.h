// Clean shutdown on SIGINT and SIGTERM: the first signal asks the training loop to stop after the
// step it is running (and to write a checkpoint when it has a directory for one); a second signal
// ends the process at once with the same status, 128 + the signal number (130 for SIGINT, 143 for
// SIGTERM), without unwinding.
//
// The handler only stores the signal number (async-signal-safe); Trainer::run polls it between
// steps, so a step is never cut in half and the weights always match a whole number of steps.
#pragma once

namespace glass::train {

// Installs the handlers for SIGINT and SIGTERM (programs call it once, before training).
void install_stop_handlers();

// The signal that asked for a stop, or 0 when none has.
int stop_signal();

// For tests: forget a requested stop.
void clear_stop_signal();

// "SIGINT", "SIGTERM", or "a signal".
const char* stop_signal_name(int sig);

}  // namespace glass::train
