#include "engine/device.h"

#include "engine/device_runtime.h"
#include "engine/error.h"
#include "engine/launch.h"

namespace glass {

namespace {

// Every device glass knows, built in or not: its name, and whether "<name>:N" picks one of several.
struct KindName {
  DeviceKind kind;
  const char* name;
  bool indexed;
};
constexpr KindName kKindNames[] = {{DeviceKind::cpu, "cpu", false},
                                   {DeviceKind::emu, "emu", false},
                                   {DeviceKind::cuda, "cuda", true},
                                   {DeviceKind::meta, "meta", false}};

// Whether `name` names a device of kind `k` (well-formed or not: "cudax" is cuda's, malformed).
bool names(const KindName& k, const std::string& name) {
  return k.indexed ? name.rfind(k.name, 0) == 0 : name == k.name;
}

}  // namespace

std::string Device::str() const {
  for (const KindName& k : kKindNames)
    if (k.kind == kind)
      return k.indexed ? std::string(k.name) + ":" + std::to_string(index) : k.name;
  return "?";
}

Device Device::parse(const std::string& name) {
  for (const KindName& k : kKindNames) {
    if (!names(k, name)) continue;
    const DeviceRuntime* runtime = find_runtime(k.kind);
    if (runtime == nullptr)
      fail("device '{}' is not available: {} (devices: {})", name, missing_device_reason(k.kind),
           built_device_names());
    return {k.kind, k.indexed ? runtime->parse_index(name) : 0};
  }
  fail("unknown device '{}' (devices: {})", name, built_device_names());
}

// The first device, in DeviceKind order, that auto may pick and that is present; else cpu.
Device Device::best_available() {
  for (const DeviceRuntime* r : built_runtimes())
    if (r->capabilities().picked_by_auto && r->device_count() > 0) return {r->kind(), 0};
  return kCPU;
}

std::string device_name(Device d) {
  const DeviceRuntime* runtime = find_runtime(d.kind);
  if (runtime == nullptr)
    fail("device_name: {} is not built into this glass (devices: {})", d.str(),
         built_device_names());
  return runtime->hardware_name(d);
}

void synchronize(Device d) {
  note_host_sync(d, "synchronize");
  runtime_for(d).synchronize(d);
}

}  // namespace glass
