// The CUDA devices of this machine, as the engine sees them.
//
// Built with CUDA, glass looks for a GPU at run time: a program that never uses `cuda` runs on a
// machine without one, and one that does gets a single clear error line the first time it
// touches the device (an allocation, a kernel table lookup, a transfer).
#pragma once

#include <string>

namespace glass::cuda {

// How many CUDA GPUs the runtime sees; 0 when there is none or no driver (never throws).
int device_count();

// Throws glass::Error unless GPU `index` exists, e.g.
//   "device cuda:0: no CUDA GPU found (cudaGetDeviceCount: no CUDA-capable device is detected)"
// and makes it the calling thread's current device.
void require_device(int index);

// Makes GPU `index` current on the calling thread for the guard's scope (require_device), then
// the one current before. Objects CUDA ties to the current GPU (streams, events, cuBLAS handles)
// are made under one, so that they belong to the GPU they are for whatever the thread used last.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_;
};

// The GPU's marketing name as the driver reports it ("NVIDIA H200"); require_device's error when
// there is no such GPU.
std::string gpu_name(int index);

// Blocks until every piece of work queued on GPU `index`, on any stream, has finished.
void synchronize_device(int index);

}  // namespace glass::cuda
