// Device: where a tensor's memory lives and whose kernels run on it.
// `cpu` runs kernels/cpu on host memory. `emu` runs the CUDA kernels of kernels/cuda on the CPU
// through the emulator (engine/emu): its memory is host memory behind device-style pointers.
// `cuda` runs the same kernels compiled by nvcc on a GPU (engine/cuda); "cuda" is GPU 0, "cuda:N"
// GPU N. A build with CUDA (GLASS_HAS_CUDA) looks for the GPU at run time: parsing "cuda" always
// works there, and the first use of a missing GPU throws one clear line.
#pragma once

#include <cstdint>
#include <string>

namespace glass {

enum class DeviceKind : uint8_t { cpu, emu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "emu", "cuda:0"
  // Parses "cpu", "emu", "cuda" and "cuda:N"; throws glass::Error naming the string when it is
  // malformed or the device is not built in.
  static Device parse(const std::string& name);
  // What "auto" means: cuda:0 when this build has CUDA and a GPU is present, else cpu.
  static Device best_available();
};

// What a report calls the hardware: the GPU's name on `cuda` ("NVIDIA H200"), the host CPU's model
// on `cpu`, and "emu (CUDA emulator) on <host CPU>" on `emu`, so that an emulated time is never
// mistaken for a GPU's.
std::string device_name(Device d);

// Blocks until every kernel issued to `d` so far has finished. On `cpu` and `emu` a kernel has
// finished when its launch returns, so there is nothing to wait for; on `cuda` the host waits for
// the GPU (cudaDeviceSynchronize). Call it before reading a host clock that should include the
// work.
void synchronize(Device d);

inline const Device kCPU{DeviceKind::cpu, 0};
inline const Device kEmu{DeviceKind::emu, 0};
inline const Device kCUDA{DeviceKind::cuda, 0};

}  // namespace glass
