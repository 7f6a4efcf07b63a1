// Device: where a tensor's memory lives and whose kernels run on it.
// `cpu` runs kernels/cpu on host memory. `emu` runs the CUDA kernels of kernels/cuda on the CPU
// through the emulator (engine/emu): its memory is host memory behind device-style pointers.
// `cuda` runs the same kernels compiled by nvcc on a GPU (engine/cuda); "cuda" is GPU 0, "cuda:N"
// GPU N. A build with CUDA (GLASS_HAS_CUDA) looks for the GPU at run time: parsing "cuda" always
// works there, and the first use of a missing GPU throws one clear line.
#pragma once

#include <cstdint>
#include <string>

namespace glass {

enum class DeviceKind : uint8_t { cpu, emu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "emu", "cuda:0"
  // Parses "cpu", "emu", "cuda" and "cuda:N"; throws glass::Error naming the string when it is
  // malformed or the device is not built in.
  static Device parse(const std::string& name);
  // What "auto" means: cuda:0 when this build has CUDA and a GPU is present, else cpu.
  static Device best_available();
};

inline const Device kCPU{DeviceKind::cpu, 0};
inline const Device kEmu{DeviceKind::emu, 0};
inline const Device kCUDA{DeviceKind::cuda, 0};

}  // namespace glass
