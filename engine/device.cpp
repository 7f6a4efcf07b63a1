#include "engine/device.h"

#include "engine/error.h"

namespace glass {

std::string Device::str() const {
  switch (kind) {
    case DeviceKind::cpu:
      return "cpu";
  }
  return "?";
}

Device Device::parse(const std::string& name) {
  if (name == "cpu") return kCPU;
  if (name.rfind("cuda", 0) == 0 || name == "emu")
    fail("device '{}' is not available in this build of glass (devices: cpu)", name);
  fail("unknown device '{}' (devices: cpu)", name);
}

}  // namespace glass
