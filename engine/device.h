// Device: where a tensor's memory lives and whose kernels run on it.
// Only `cpu` exists so far; `cuda` and `emu` slot in as further kinds with their own kernel
// table in kernels/ and their own Allocator.
#pragma once

#include <string>

namespace glass {

enum class DeviceKind : uint8_t { cpu };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string str() const;
  // Parses "cpu" (and later "cuda", "cuda:1", "emu"); throws glass::Error naming the string.
  static Device parse(const std::string& name);
};

inline const Device kCPU{DeviceKind::cpu, 0};

}  // namespace glass
