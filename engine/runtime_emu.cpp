// The `emu` device's runtime (engine/device_runtime.h): the CUDA emulator's device memory
// (engine/emu/memory.h): host memory behind device pointers, 256-byte aligned like cudaMalloc's,
// fresh bytes 0xFF, red zones with GLASS_EMU_CHECK=1, at most GLASS_EMU_GPU_MEMORY bytes
// (engine/emu/gpu_memory.h). Being host memory, it is copied by memcpy; its kernels run on the
// host and have finished when their launch returns, so there are no streams to wait for.
// Compiled only with GLASS_EMU.
#include "engine/device_runtime.h"
#include "engine/emu/gpu_memory.h"
#include "engine/emu/memory.h"
#include "engine/emu/settings.h"

namespace glass {

namespace {

class EmuRuntime final : public HostMemoryRuntime {
 public:
  EmuRuntime()
      : HostMemoryRuntime(DeviceKind::emu, "emu",
                          {.host_memory = true,
                           .kernels_on_host = true,
                           .cuda_kernels = true,
                           .fused_classifier = true,
                           .gemm_workspace = true,
                           .device_scalars = true,
                           .tf32 = true,
                           .kernel_ladders = true,
                           .device_flags = true}) {}

  std::string hardware_name(Device) const override {
    return "emu (CUDA emulator) on " + host_cpu_name();
  }

  // It throws when full; the allocator then gives its cache back and retries.
  void* device_malloc(Device, size_t bytes) const override {
    try {
      return emu::device_malloc(bytes);
    } catch (const emu::OutOfDeviceMemory&) {
      return nullptr;
    }
  }
  void device_free(Device, void* ptr) const override { emu::device_free(ptr); }
  bool exact_sizes() const override { return emu::settings().check_memory; }

  // GLASS_EMU_GPU_MEMORY's budget, less what the emulator has handed out.
  std::optional<DeviceMemory> memory_info(Device) const override {
    const emu::GpuMemoryInfo m = emu::gpu_memory_info(emu::kEmuDeviceMemory);
    return DeviceMemory{static_cast<int64_t>(m.free), static_cast<int64_t>(m.total),
                        "the emulated GPU's memory (GLASS_EMU_GPU_MEMORY)"};
  }
};

}  // namespace

const DeviceRuntime& emu_runtime() {
  // Never destroyed: tensors kept in statics are freed through it at exit.
  static const EmuRuntime& runtime = *new EmuRuntime;
  return runtime;
}

}  // namespace glass
