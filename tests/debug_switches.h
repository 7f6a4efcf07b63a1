// Sets the debug switches (engine/debug.h) for one test and restores the previous ones.
#pragma once

#include "engine/debug.h"

namespace glass::testing {

class DebugSwitches {
 public:
  explicit DebugSwitches(const DebugSettings& s) : saved_(debug_settings()) {
    set_debug_settings(s);
  }
  ~DebugSwitches() { set_debug_settings(saved_); }
  DebugSwitches(const DebugSwitches&) = delete;
  DebugSwitches& operator=(const DebugSwitches&) = delete;

 private:
  DebugSettings saved_;
};

}  // namespace glass::testing
