// The device runtimes (engine/device_runtime.h): every device this build has is registered, once,
// under its own kind; one it lacks is refused with one line naming it and the devices there are;
// the capabilities agree with engine/device.h's has_data and runs_cuda_kernels; and each
// runtime's memory holds what is copied in (checked against the host bytes, not another runtime).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/device_runtime.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::error_of;

constexpr DeviceKind kAllKinds[] = {DeviceKind::cpu, DeviceKind::emu, DeviceKind::cuda,
                                    DeviceKind::meta};

// What this build was configured with, from CMake's definitions rather than from the registry.
std::vector<DeviceKind> configured_kinds() {
  std::vector<DeviceKind> kinds{DeviceKind::cpu};
#if defined(GLASS_HAS_EMU)
  kinds.push_back(DeviceKind::emu);
#endif
#if defined(GLASS_HAS_CUDA)
  kinds.push_back(DeviceKind::cuda);
#endif
#if defined(GLASS_HAS_EMU)
  kinds.push_back(DeviceKind::meta);
#endif
  return kinds;
}

bool configured(DeviceKind k) {
  for (DeviceKind c : configured_kinds())
    if (c == k) return true;
  return false;
}

TEST(DeviceRuntimes, EveryBuiltDeviceHasItsOwnRuntime) {
  std::string names;
  for (DeviceKind k : kAllKinds) {
    const DeviceRuntime* r = find_runtime(k);
    ASSERT_EQ(r != nullptr, configured(k)) << Device{k, 0}.str();
    if (r == nullptr) continue;
    EXPECT_EQ(r->kind(), k);
    EXPECT_EQ(&runtime_for(Device{k, 0}), r);
    // The name a user types parses back to this device.
    EXPECT_EQ(Device::parse(r->name()), (Device{k, 0})) << r->name();
    names += (names.empty() ? "" : ", ") + std::string(r->name());
  }
  EXPECT_EQ(built_device_names(), names);
  EXPECT_EQ(built_runtimes().size(), configured_kinds().size());
}

TEST(DeviceRuntimes, AnUnbuiltDeviceIsRefusedByName) {
  int unbuilt = 0;
  for (DeviceKind k : kAllKinds) {
    if (configured(k)) continue;
    ++unbuilt;
    const Device d{k, 0};
    const std::string e = error_of([&] { runtime_for(d); });
    EXPECT_EQ(e.rfind("device '" + d.str() + "' is not available: ", 0), 0u) << e;
    EXPECT_NE(e.find(missing_device_reason(k)), std::string::npos) << e;
    EXPECT_NE(e.find("(devices: " + built_device_names() + ")"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(error_of([&] { capabilities(d); }), "");
  }
  if (unbuilt == 0) GTEST_SKIP() << "every device is built in here";
}

// The same line for a kind no runtime serves, in every build (the configurations CI builds have
// every device, so the test above skips there).
TEST(DeviceRuntimes, AKindWithoutARuntimeIsRefusedInOneLine) {
  const Device none{static_cast<DeviceKind>(kDeviceKinds), 0};
  EXPECT_EQ(find_runtime(none.kind), nullptr);
  const std::string e = error_of([&] { runtime_for(none); });
  EXPECT_EQ(e.rfind("device '?' is not available: ", 0), 0u) << e;
  EXPECT_NE(e.find("(devices: " + built_device_names() + ")"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(std::string(missing_device_reason(DeviceKind::cuda)).find("no CUDA runtime"),
            std::string::npos);
}

TEST(DeviceRuntimes, CapabilitiesAgreeWithTheDeviceHeader) {
  for (const DeviceRuntime* r : built_runtimes()) {
    const Device d{r->kind(), 0};
    const Capabilities& c = r->capabilities();
    EXPECT_EQ(c.holds_data, has_data(d)) << d.str();
    EXPECT_EQ(c.cuda_kernels, runs_cuda_kernels(d)) << d.str();
    // Memory the host reads directly has no native streams to order copies on.
    if (c.host_memory) {
      EXPECT_FALSE(c.native_streams) << d.str();
    }
  }
  EXPECT_FALSE(capabilities(kCPU).cuda_kernels);
  EXPECT_FALSE(capabilities(kCPU).device_flags);
  EXPECT_TRUE(capabilities(kCPU).host_memory);
}

// Bytes copied in read back the same, and zero() zeroes, on every device with data and memory
// present here (cuda needs a GPU, or the emulated runtime's).
TEST(DeviceRuntimes, MemoryHoldsWhatIsCopiedIn) {
  for (const DeviceRuntime* r : built_runtimes()) {
    const Device d{r->kind(), 0};
    if (!r->capabilities().holds_data || r->device_count() == 0) continue;
    r->require(d);
    constexpr size_t n = 1000;
    std::vector<uint8_t> in(n), out(n, 0xAB), zeros(n, 0xAB);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 7 + 3);
    void* p = r->device_malloc(d, n);
    ASSERT_NE(p, nullptr) << d.str();
    r->copy_from_host(p, in.data(), n);
    const HostRead read{out.data(), p, n};
    r->read_to_host(std::span(&read, 1));
    EXPECT_EQ(out, in) << d.str();
    r->zero(p, n);
    const HostRead read_zeros{zeros.data(), p, n};
    r->read_to_host(std::span(&read_zeros, 1));
    EXPECT_EQ(zeros, std::vector<uint8_t>(n, 0)) << d.str();
    r->device_free(d, p);
  }
}

#if defined(GLASS_HAS_EMU)
// meta's memory is counted, never backed: distinct, 256-byte aligned, non-canonical addresses.
TEST(DeviceRuntimes, MetaAddressesAreAlignedDistinctAndNonCanonical) {
  const DeviceRuntime& meta = runtime_for(kMeta);
  const auto a = reinterpret_cast<uintptr_t>(meta.device_malloc(kMeta, 1));
  const auto b = reinterpret_cast<uintptr_t>(meta.device_malloc(kMeta, 300));
  const auto c = reinterpret_cast<uintptr_t>(meta.device_malloc(kMeta, 1));
  EXPECT_EQ(a % 256, 0u);
  EXPECT_GE(b, a + 256);
  EXPECT_GE(c, b + 512);   // 300 bytes take two 256-byte units
  EXPECT_NE(a >> 47, 0u);  // above the canonical user range: a host access faults
  EXPECT_FALSE(device_memory(kMeta).has_value());
}
#endif

}  // namespace
}  // namespace glass
