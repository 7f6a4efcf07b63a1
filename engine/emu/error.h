// EmuError: what the emulator throws when a kernel misbehaves (deadlock, out-of-bounds write,
// exception inside a CUDA thread) or a launch is invalid. The message always names the kernel.
#pragma once

#include <stdexcept>
#include <string>

namespace glass::emu {

class EmuError : public std::runtime_error {
 public:
  explicit EmuError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace glass::emu
