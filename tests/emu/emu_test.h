// Fixture for the emulator tests: each test starts from known settings (two worker threads,
// natural order, no checks, no breakpoint) whatever the environment says, and restores the
// previous settings afterwards.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/emu/error.h"
#include "engine/emu/settings.h"

namespace glass::emu::testing {

class EmuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = settings();
    Settings s = saved_;
    s.worker_threads = 2;
    s.shuffle_seed.reset();
    s.check_memory = false;
    s.race_check = false;
    s.init_check = false;
    s.break_at.reset();
    set_settings(s);
  }
  void TearDown() override { set_settings(saved_); }

  static void configure(const std::function<void(Settings&)>& change) {
    Settings s = settings();
    change(s);
    set_settings(s);
  }

 private:
  Settings saved_;
};

// The message of the EmuError that `f` throws; fails the test if it throws nothing or another
// type.
inline std::string emu_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const EmuError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an EmuError";
  return "";
}

}  // namespace glass::emu::testing
