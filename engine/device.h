// Device: where a tensor's memory lives and whose kernels run on it.
// `cpu` runs kernels/cpu on host memory. `emu` runs the CUDA kernels of kernels/cuda on the CPU
// through the emulator (engine/emu): its memory is host memory behind device-style pointers.
// `cuda` (a real GPU) slots in as a further kind with its own kernel table and Allocator.
#pragma once

#include <cstdint>
#include <string>

namespace glass {

enum class DeviceKind : uint8_t { cpu, emu };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string str() const;
  // Parses "cpu" and "emu" (and later "cuda", "cuda:1"); throws glass::Error naming the string.
  static Device parse(const std::string& name);
};

inline const Device kCPU{DeviceKind::cpu, 0};
inline const Device kEmu{DeviceKind::emu, 0};

}  // namespace glass
