// The `meta` device's runtime (engine/device_runtime.h): memory that is counted, never backed.
// Its addresses run from 2^62 up, in the order requested: non-canonical on x86-64 (bits 47..63
// differ), so that a host access faults at once, and aligned to 256 bytes like cudaMalloc's
// (cuBLASLt's heuristic sees the alignment of the pointers it is given, gemm_lt.cu). It never
// runs out. Copies drop their values and nothing runs, so there is nothing to wait for. Its
// capabilities are those of the GPU it plans for: it plans the kernels of kernels/cuda with the emu
// table's host launchers (engine/device.h). Compiled only with GLASS_EMU.
#include <algorithm>
#include <atomic>

#include "engine/device_runtime.h"

namespace glass {

namespace {

class MetaRuntime final : public DeviceRuntime {
 public:
  MetaRuntime()
      : DeviceRuntime(DeviceKind::meta, "meta",
                      {.holds_data = false,
                       .cuda_kernels = true,
                       .fused_classifier = true,
                       .gemm_workspace = true,
                       .device_scalars = true,
                       .tf32 = true,
                       .kernel_ladders = true,
                       .device_flags = true}) {}

  std::string hardware_name(Device) const override { return "meta (shapes only, nothing runs)"; }

  void* device_malloc(Device, size_t bytes) const override {
    const uint64_t size = (static_cast<uint64_t>(bytes) + 255) / 256 * 256;
    return reinterpret_cast<void*>(next_address_.fetch_add(std::max<uint64_t>(size, 256)));
  }
  void device_free(Device, void*) const override {}  // nothing was backed
  std::optional<DeviceMemory> memory_info(Device) const override { return std::nullopt; }

  // No data: an upload's values are dropped (a planned upload), and nothing is read or zeroed.
  void copy_from_host(void*, const void*, size_t) const override {}
  void read_to_host(std::span<const HostRead>) const override {}
  void zero(void*, size_t) const override {}

 private:
  mutable std::atomic<uint64_t> next_address_{uint64_t{1} << 62};
};

}  // namespace

const DeviceRuntime& meta_runtime() {
  // Never destroyed: tensors kept in statics are freed through it at exit.
  static const MetaRuntime& runtime = *new MetaRuntime;
  return runtime;
}

}  // namespace glass
