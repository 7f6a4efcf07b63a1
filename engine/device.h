// Device: where a tensor's memory lives and whose kernels run on it.
// `cpu` runs kernels/cpu on host memory. `emu` runs the CUDA kernels of kernels/cuda on the CPU
// through the emulator (engine/emu): its memory is host memory behind device-style pointers.
// `cuda` runs the same kernels compiled by nvcc on a GPU (engine/cuda); "cuda" is GPU 0, "cuda:N"
// GPU N. A build with CUDA (GLASS_HAS_CUDA) looks for the GPU at run time: parsing "cuda" always
// works there, and the first use of a missing GPU throws one clear line.
// `meta` (as PyTorch's) has shapes, dtypes and strides but no data: its tensors get counted,
// never-dereferenced addresses from the allocator, and its launches go through the gateway to the
// observers without running (the emu kernel table's host launchers, so the same kernel names,
// grids, FLOPs and bytes as on a GPU). It plans work: `roofline step` plans one training step on
// it, and its allocator's peak is the peak the same program reaches on a GPU (engine/allocator.h).
// Reading a value of a meta tensor throws ("meta tensors have no data: ..."). It needs the emu
// kernel table: a build with GLASS_EMU=OFF has no meta.
#pragma once

#include <cstdint>
#include <string>

namespace glass {

enum class DeviceKind : uint8_t { cpu, emu, cuda, meta };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "emu", "cuda:0", "meta"
  // Parses "cpu", "emu", "cuda", "cuda:N" and "meta"; throws glass::Error naming the string when it
  // is malformed or the device is not built in.
  static Device parse(const std::string& name);
  // What "auto" means: cuda:0 when this build has CUDA and a GPU is present, else cpu.
  static Device best_available();
};

// Whether tensors on `d` hold values: false on `meta` only. Code that reads values (a loss, a
// sampled token, a NaN check) asks this rather than testing the kind.
inline bool has_data(Device d) { return d.kind != DeviceKind::meta; }
// Whether `d` takes the kernels of kernels/cuda (bf16 mixed precision, the fused classifier, the
// GPU's attention kernels): emu and cuda run them, meta plans them. False on cpu.
inline bool runs_cuda_kernels(Device d) { return d.kind != DeviceKind::cpu; }

// What a report calls the hardware: the GPU's name on `cuda` ("NVIDIA H200"), the host CPU's model
// on `cpu`, "emu (CUDA emulator) on <host CPU>" on `emu` and "meta (shapes only, nothing runs)" on
// `meta`, so that an emulated time is never
// mistaken for a GPU's.
std::string device_name(Device d);

// Blocks until every kernel issued to `d` so far has finished. On `cpu` and `emu` a kernel has
// finished when its launch returns, and on `meta` nothing runs, so there is nothing to wait for;
// on `cuda` the host waits for
// the GPU (cudaDeviceSynchronize). Call it before reading a host clock that should include the
// work.
void synchronize(Device d);

inline const Device kCPU{DeviceKind::cpu, 0};
inline const Device kEmu{DeviceKind::emu, 0};
inline const Device kCUDA{DeviceKind::cuda, 0};
inline const Device kMeta{DeviceKind::meta, 0};

}  // namespace glass
