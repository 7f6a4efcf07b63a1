#include "engine/device_memory.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(GLASS_HAS_EMU)
#include "engine/emu/gpu_memory.h"
#endif
#if defined(GLASS_HAS_CUDA)
#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"
#include "engine/cuda/runtime.h"
#endif

namespace glass {

namespace {

// A "Name:  123 kB" line of /proc/meminfo in bytes, or -1.
int64_t meminfo_bytes(const std::string& meminfo, const char* name) {
  std::istringstream in(meminfo);
  std::string line;
  const std::string key = std::string(name) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    long long kib = -1;
    if (std::sscanf(line.c_str() + key.size(), "%lld", &kib) != 1) return -1;
    return static_cast<int64_t>(kib) * 1024;
  }
  return -1;
}

std::optional<DeviceMemory> host_memory() {
  std::ifstream f("/proc/meminfo");
  if (!f) return std::nullopt;
  std::stringstream text;
  text << f.rdbuf();
  const int64_t available = meminfo_bytes(text.str(), "MemAvailable");
  const int64_t total = meminfo_bytes(text.str(), "MemTotal");
  if (available < 0 || total < 0) return std::nullopt;
  return DeviceMemory{available, total, "MemAvailable of /proc/meminfo"};
}

}  // namespace

std::optional<DeviceMemory> device_memory(Device device) {
  switch (device.kind) {
    case DeviceKind::cpu:
      return host_memory();
    case DeviceKind::emu: {
#if defined(GLASS_HAS_EMU)
      const emu::GpuMemoryInfo m = emu::gpu_memory_info(emu::kEmuDeviceMemory);
      return DeviceMemory{static_cast<int64_t>(m.free), static_cast<int64_t>(m.total),
                          "the emulated GPU's memory (GLASS_EMU_GPU_MEMORY)"};
#else
      return std::nullopt;
#endif
    }
    case DeviceKind::cuda: {
#if defined(GLASS_HAS_CUDA)
      const cuda::DeviceGuard guard(device.index);
      size_t free = 0, total = 0;
      GLASS_CUDA_CHECK(cudaMemGetInfo(&free, &total),
                       "device_memory (free and total bytes of the GPU)");
#if defined(GLASS_CUDA_RUNTIME_EMU)
      const char* source = "cudaMemGetInfo (the emulated CUDA runtime: GLASS_EMU_GPU_MEMORY)";
#else
      const char* source = "cudaMemGetInfo";
#endif
      return DeviceMemory{static_cast<int64_t>(free), static_cast<int64_t>(total), source};
#else
      return std::nullopt;
#endif
    }
    case DeviceKind::meta:
      return std::nullopt;
  }
  return std::nullopt;
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
