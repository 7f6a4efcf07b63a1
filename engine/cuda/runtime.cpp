#include "engine/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include "engine/cuda/check.h"
#include "engine/error.h"

namespace glass::cuda {

namespace {

// The answer of cudaGetDeviceCount, asked once: the set of GPUs does not change while we run.
struct DeviceCount {
  int count = 0;
  cudaError_t error = cudaSuccess;
};

const DeviceCount& probe() {
  static const DeviceCount answer = [] {
    DeviceCount d;
    d.error = cudaGetDeviceCount(&d.count);
    if (d.error != cudaSuccess) {
      d.count = 0;
      cudaGetLastError();
    }
    return d;
  }();
  return answer;
}

// The GPU require_device last made current on this thread (-1: none yet, CUDA's default 0).
thread_local int t_current = -1;

}  // namespace

int device_count() { return probe().count; }

void require_device(int index) {
  const DeviceCount& d = probe();
  if (d.error != cudaSuccess)
    fail("device cuda:{}: no CUDA GPU found (cudaGetDeviceCount: {})", index,
         cudaGetErrorString(d.error));
  if (d.count == 0) fail("device cuda:{}: no CUDA GPU found (cudaGetDeviceCount: 0)", index);
  if (index < 0 || index >= d.count)
    fail("device cuda:{}: there is no such GPU ({} CUDA GPU{} found: cuda:0 to cuda:{})", index,
         d.count, d.count == 1 ? "" : "s", d.count - 1);
  if (t_current == index) return;
  const std::string what = fmt::format("device cuda:{}", index);
  GLASS_CUDA_CHECK(cudaSetDevice(index), what.c_str());
  t_current = index;
}

DeviceGuard::DeviceGuard(int index) : saved_(t_current) { require_device(index); }

DeviceGuard::~DeviceGuard() {
  if (t_current == saved_) return;
  cudaSetDevice(saved_ < 0 ? 0 : saved_);  // a destructor must not throw; the GPU existed before
  t_current = saved_;
}

std::string gpu_name(int index) {
  require_device(index);
  cudaDeviceProp prop{};
  GLASS_CUDA_CHECK(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  return prop.name;
}

void synchronize_device(int index) {
  require_device(index);
  GLASS_CUDA_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

}  // namespace glass::cuda
