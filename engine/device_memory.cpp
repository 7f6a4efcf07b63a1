#include "engine/device_memory.h"

#include <fmt/format.h>

#include "engine/device_runtime.h"

namespace glass {

// Each device's runtime says (engine/device_runtime.h); nullopt where it is not built in.
std::optional<DeviceMemory> device_memory(Device device) {
  const DeviceRuntime* runtime = find_runtime(device.kind);
  return runtime != nullptr ? runtime->memory_info(device) : std::nullopt;
}

std::string format_bytes(double bytes) {
  constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  double v = bytes / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : 1, units[u]);
}

}  // namespace glass
