// The registry of device runtimes (engine/device_runtime.h): the one place that lists them. A
// device's runtime file is compiled only when the device is built in (CMakeLists.txt), so its
// accessor is declared, and listed, under the same condition.
#include "engine/device_runtime.h"

#include <array>
#include <cstring>

#include "engine/error.h"

namespace glass {

const DeviceRuntime& cpu_runtime();  // engine/runtime_cpu.cpp
#if defined(GLASS_HAS_EMU)
const DeviceRuntime& emu_runtime();   // engine/runtime_emu.cpp
const DeviceRuntime& meta_runtime();  // engine/runtime_meta.cpp
#endif
#if defined(GLASS_HAS_CUDA)
const DeviceRuntime& cuda_runtime();  // engine/cuda/runtime_cuda.cpp
#endif

namespace {

// By DeviceKind; null where the device is not built in. Built on first use, so that no static
// initialiser depends on another file's.
const std::array<const DeviceRuntime*, kDeviceKinds>& runtime_table() {
  static const std::array<const DeviceRuntime*, kDeviceKinds> table = [] {
    std::array<const DeviceRuntime*, kDeviceKinds> t{};
    for (const DeviceRuntime* r : {
           &cpu_runtime(),
#if defined(GLASS_HAS_EMU)
               &emu_runtime(), &meta_runtime(),
#endif
#if defined(GLASS_HAS_CUDA)
               &cuda_runtime(),
#endif
         })
      t[static_cast<size_t>(r->kind())] = r;
    return t;
  }();
  return table;
}

}  // namespace

const DeviceRuntime* find_runtime(DeviceKind kind) {
  const size_t k = static_cast<size_t>(kind);
  return k < kDeviceKinds ? runtime_table()[k] : nullptr;
}

const std::vector<const DeviceRuntime*>& built_runtimes() {
  static const std::vector<const DeviceRuntime*> all = [] {
    std::vector<const DeviceRuntime*> v;
    for (const DeviceRuntime* r : runtime_table())
      if (r != nullptr) v.push_back(r);
    return v;
  }();
  return all;
}

std::string built_device_names() {
  std::string s;
  for (const DeviceRuntime* r : built_runtimes())
    s += (s.empty() ? "" : ", ") + std::string(r->name());
  return s;
}

const char* missing_device_reason(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cuda:
      return "this build of glass has no CUDA runtime";
    case DeviceKind::emu:
    case DeviceKind::meta:
      return "glass was built with GLASS_EMU=OFF";
    case DeviceKind::cpu:
      break;
  }
  return "it is not built into this glass";
}

const DeviceRuntime& runtime_for(Device d) {
  if (const DeviceRuntime* r = find_runtime(d.kind)) return *r;
  fail("device '{}' is not available: {} (devices: {})", d.str(), missing_device_reason(d.kind),
       built_device_names());
}

int DeviceRuntime::parse_index(const std::string& name) const {
  fail("bad device '{}': {} has no device index", name, name_);
}

void* DeviceRuntime::record_event(void*) const {
  fail("device {} has no native streams, so no events", name_);
}
bool DeviceRuntime::event_done(void*) const {
  fail("device {} has no native streams, so no events", name_);
}
void DeviceRuntime::release_event(void*) const {
  fail("device {} has no native streams, so no events", name_);
}

void HostMemoryRuntime::copy_from_host(void* device_dst, const void* host_src, size_t bytes) const {
  std::memcpy(device_dst, host_src, bytes);
}

void HostMemoryRuntime::read_to_host(std::span<const HostRead> reads) const {
  for (const HostRead& r : reads) std::memcpy(r.dst, r.src, r.bytes);
}

void HostMemoryRuntime::zero(void* device_dst, size_t bytes) const {
  std::memset(device_dst, 0, bytes);
}

}  // namespace glass
