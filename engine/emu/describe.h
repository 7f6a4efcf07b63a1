// How the emulator's messages print indices, dimensions and call sites.
#pragma once

#include <vector_types.h>

#include <cstdio>
#include <string>

#include "engine/emu/device_runtime.h"

namespace glass::emu::detail {

inline std::string describe(uint3 v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "(%u,%u,%u)", v.x, v.y, v.z);
  return buf;
}
inline std::string describe(dim3 v) { return describe(uint3{v.x, v.y, v.z}); }
inline std::string describe_mask(unsigned mask) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", mask);
  return buf;
}
inline std::string describe(Site s) { return std::string(s.file) + ":" + std::to_string(s.line); }

}  // namespace glass::emu::detail
