#include "engine/device.h"

#include "engine/error.h"

namespace glass {

// The devices this build can run, for error messages. GLASS_HAS_EMU: built with the emulator.
#if defined(GLASS_HAS_EMU)
constexpr const char* kDevices = "cpu, emu";
#else
constexpr const char* kDevices = "cpu";
#endif

std::string Device::str() const {
  switch (kind) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::emu:
      return "emu";
  }
  return "?";
}

Device Device::parse(const std::string& name) {
  if (name == "cpu") return kCPU;
#if defined(GLASS_HAS_EMU)
  if (name == "emu") return kEmu;
#endif
  if (name.rfind("cuda", 0) == 0)
    fail("device '{}' is not available: this build of glass has no CUDA runtime (devices: {})",
         name, kDevices);
  if (name == "emu")
    fail("device 'emu' is not available: glass was built with GLASS_EMU=OFF (devices: {})",
         kDevices);
  fail("unknown device '{}' (devices: {})", name, kDevices);
}

}  // namespace glass
