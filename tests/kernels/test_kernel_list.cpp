// The kernel list (kernels/kernel_list.inc) against the kernel table of every device this build
// has: each entry the list says a device must have is in its table, and each entry the list says a
// device cannot have is null there (autograd/attention.cpp tells a cuDNN attention that is not
// built by its null entry). A failure names the kernel and the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using kernels::Backend;
using kernels::KernelOn;

// One line per entry of `table` (device `kind`) that disagrees with the list.
std::vector<std::string> disagreements(const Backend& table, DeviceKind kind) {
  std::vector<std::string> found;
  auto check = [&](const char* kernel, KernelOn on, bool present) {
    if (kernels::kernel_required(on, kind) && !present)
      found.push_back(std::string(kernel) + " is missing on " + table.name);
    if (!kernels::kernel_allowed(on, kind) && present)
      found.push_back(std::string(kernel) + " is in the " + table.name +
                      " table, which the kernel list says cannot have it");
  };
#define GLASS_KERNEL(kernel, on, params) check(#kernel, KernelOn::on, table.kernel != nullptr);
#include "kernels/kernel_list.inc"
  return found;
}

// The devices of this build, each with its table.
std::vector<Device> built_devices() {
  std::vector<Device> devices{kCPU};
#if defined(GLASS_HAS_EMU)
  devices.push_back(kEmu);
  devices.push_back(kMeta);  // plans with the emu table
#endif
  if (testing::have_cuda()) devices.push_back(kCUDA);  // the emulated runtime has one
  return devices;
}

TEST(KernelList, EveryDeviceHasEveryKernelTheListGivesIt) {
  for (Device d : built_devices()) {
    SCOPED_TRACE(d.str());
    const Backend& table = kernels::backend(d);
    for (const std::string& problem : disagreements(table, d.kind)) ADD_FAILURE() << problem;
  }
}

TEST(KernelList, TheDevicesOfThisBuildAreChecked) {
  // The emulated build (this machine, CI) checks cpu, emu, meta and cuda.
  std::vector<std::string> names;
  for (Device d : built_devices()) names.push_back(d.str());
#if defined(GLASS_HAS_EMU)
  EXPECT_NE(std::find(names.begin(), names.end(), "emu"), names.end());
#endif
#if defined(GLASS_HAS_CUDA)
  EXPECT_NE(std::find(names.begin(), names.end(), "cuda:0"), names.end());
#endif
}

// The check itself fails, naming kernel and device, on a table with a hole or an extra entry.
TEST(KernelList, AHoleOrAnEntryTheListForbidsIsReportedByName) {
  Backend holed = kernels::backend(kCPU);
  holed.layernorm_forward = nullptr;
  EXPECT_EQ(disagreements(holed, DeviceKind::cpu),
            std::vector<std::string>{"layernorm_forward is missing on cpu"});
#if defined(GLASS_HAS_EMU)
  Backend emu = kernels::backend(kEmu);
  emu.flash_attention_backward_mma = nullptr;
  emu.cudnn_attention_forward = emu.flash_attention_forward;
  EXPECT_EQ(disagreements(emu, DeviceKind::emu),
            (std::vector<std::string>{
                "flash_attention_backward_mma is missing on emu",
                "cudnn_attention_forward is in the emu table, which the kernel list says cannot "
                "have it"}));
#endif
}

}  // namespace
}  // namespace glass
