// The `cpu` device's runtime (engine/device_runtime.h): host memory from aligned_alloc, memcpy
// copies, no streams of its own; its kernels (kernels/cpu) have finished when their launch
// returns and throw their own errors. Free memory is MemAvailable of /proc/meminfo.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "engine/device_runtime.h"

namespace glass {

std::string host_cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown host CPU";
}

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

class CpuRuntime final : public HostMemoryRuntime {
 public:
  CpuRuntime()
      : HostMemoryRuntime(
            DeviceKind::cpu, "cpu",
            {.host_memory = true, .kernels_on_host = true, .small_host_blocks = true}) {}

  std::string hardware_name(Device) const override { return host_cpu_name(); }

  // 64-byte alignment: a cache line, and what AVX-512 loads like.
  // aligned_alloc wants a size that is a multiple of the alignment.
  void* device_malloc(Device, size_t bytes) const override {
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void device_free(Device, void* ptr) const override { std::free(ptr); }

  // MemAvailable (what the kernel can give without swapping) of MemTotal.
  std::optional<DeviceMemory> memory_info(Device) const override {
    std::ifstream f("/proc/meminfo");
    if (!f) return std::nullopt;
    std::stringstream text;
    text << f.rdbuf();
    const int64_t available = meminfo_bytes(text.str(), "MemAvailable");
    const int64_t total = meminfo_bytes(text.str(), "MemTotal");
    if (available < 0 || total < 0) return std::nullopt;
    return DeviceMemory{available, total, "MemAvailable of /proc/meminfo"};
  }
};

}  // namespace

const DeviceRuntime& cpu_runtime() {
  // Never destroyed: tensors kept in statics are freed through it at exit.
  static const CpuRuntime& runtime = *new CpuRuntime;
  return runtime;
}

}  // namespace glass
