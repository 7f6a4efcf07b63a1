#include "engine/device.h"

#include <charconv>
#include <fstream>

#include "engine/error.h"
#include "engine/launch.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass {

// The devices this build can run, for error messages. GLASS_HAS_EMU: built with the emulator;
// GLASS_HAS_CUDA: built with nvcc and the CUDA runtime.
#if defined(GLASS_HAS_EMU) && defined(GLASS_HAS_CUDA)
constexpr const char* kDevices = "cpu, emu, cuda, meta";
#elif defined(GLASS_HAS_EMU)
constexpr const char* kDevices = "cpu, emu, meta";
#elif defined(GLASS_HAS_CUDA)
constexpr const char* kDevices = "cpu, cuda";
#else
constexpr const char* kDevices = "cpu";
#endif

#if defined(GLASS_HAS_CUDA)
namespace {

// "cuda" -> 0, "cuda:N" -> N; throws naming `name` for anything else ("cuda:", "cuda:x",
// "cuda:-1").
int parse_cuda_index(const std::string& name) {
  if (name == "cuda") return 0;
  int index = -1;
  const char* first = name.data() + 5;  // after "cuda:"
  const char* last = name.data() + name.size();
  const auto [end, ec] = std::from_chars(first, last, index);
  GLASS_CHECK(name[4] == ':' && first != last && ec == std::errc() && end == last && index >= 0,
              "bad device '{}': expected cuda or cuda:N with N a GPU index (0, 1, ...)", name);
  return index;
}

}  // namespace
#endif

std::string Device::str() const {
  switch (kind) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::emu:
      return "emu";
    case DeviceKind::cuda:
      return "cuda:" + std::to_string(index);
    case DeviceKind::meta:
      return "meta";
  }
  return "?";
}

Device Device::parse(const std::string& name) {
  if (name == "cpu") return kCPU;
#if defined(GLASS_HAS_EMU)
  if (name == "emu") return kEmu;
  if (name == "meta") return kMeta;  // plans with the emu kernel table's launchers
#endif
  if (name.rfind("cuda", 0) == 0) {
#if defined(GLASS_HAS_CUDA)
    return {DeviceKind::cuda, parse_cuda_index(name)};
#else
    fail("device '{}' is not available: this build of glass has no CUDA runtime (devices: {})",
         name, kDevices);
#endif
  }
  if (name == "emu" || name == "meta")
    fail("device '{}' is not available: glass was built with GLASS_EMU=OFF (devices: {})", name,
         kDevices);
  fail("unknown device '{}' (devices: {})", name, kDevices);
}

// An emulated GPU (-DGLASS_CUDA_RUNTIME=emu) is not "a GPU": auto never picks one, so that a test
// or a user run without --device behaves as on a machine without a GPU; --device cuda asks for it.
Device Device::best_available() {
#if defined(GLASS_HAS_CUDA) && !defined(GLASS_CUDA_RUNTIME_EMU)
  if (cuda::device_count() > 0) return kCUDA;
#endif
  return kCPU;
}

namespace {
// The "model name" line of /proc/cpuinfo; "unknown host CPU" where there is none.
std::string host_cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown host CPU";
}
}  // namespace

std::string device_name(Device d) {
  switch (d.kind) {
    case DeviceKind::cpu:
      return host_cpu_name();
    case DeviceKind::emu:
      return "emu (CUDA emulator) on " + host_cpu_name();
    case DeviceKind::meta:
      return "meta (shapes only, nothing runs)";
    case DeviceKind::cuda:
#if defined(GLASS_HAS_CUDA)
      return cuda::gpu_name(d.index);
#else
      break;
#endif
  }
  fail("device_name: {} is not built into this glass (devices: {})", d.str(), kDevices);
}

void synchronize(Device d) {
  note_host_sync(d, "synchronize");
#if defined(GLASS_HAS_CUDA)
  if (d.kind == DeviceKind::cuda) cuda::synchronize_device(d.index);
#else
  (void)d;
#endif
}

}  // namespace glass
