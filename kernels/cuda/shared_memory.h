// allow_dynamic_shared_memory: how a kernel launcher lets its kernel use more than the default
// 48 KB of shared memory per block.
//
// On the GPU a block gets at most 48 KB of shared memory (static __shared__ plus dynamic) unless
// its kernel opts in, once per device, with cudaFuncSetAttribute(kernel,
// cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), up to the device's
// cudaDevAttrMaxSharedMemoryPerBlockOptin (227 KB on sm_90); a launch over the limit fails.
// The emulator enforces the same limits (engine/emu/shared_memory_limits.h), so this one call,
// before the launch, works for every device the launcher serves (kernel_launcher.h):
// - on `cuda` (nvcc's build, or the host compiler's on the emulated CUDA runtime): checks `bytes`
//   against the current device's opt-in limit (a clear error naming the kernel when over), then
//   calls cudaFuncSetAttribute, checked;
// - on `emu`: records the opt-in in the emulator's registry, keyed by the kernel function, with
//   the same check against the emulated device's limit (the registry the emulated runtime's
//   cudaFuncSetAttribute writes too).
//
//   const size_t smem = tile_bytes(head_dim);
//   allow_dynamic_shared_memory(flash_forward_kernel, "flash_forward", smem, qkv.device());
//   launch_cuda_kernel(info /* .shared_bytes = smem */, flash_forward_kernel, ...);
#pragma once

#include <cstddef>
#include <string>

#include "engine/error.h"
#include "kernels/cuda/kernel_launcher.h"

#if !defined(__CUDACC__)
#include "engine/emu/shared_memory_limits.h"
#endif

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

// Lets blocks of `kernel` use up to `bytes` of dynamic shared memory (static __shared__ comes on
// top, and both together stay within the device's opt-in limit). Throws naming `name` when the
// device cannot give that much. Cheap enough to call before every launch.
template <class... Params>
void allow_dynamic_shared_memory(void (*kernel)(Params...), const char* name, size_t bytes,
                                 Device on) {
#if !defined(__CUDACC__)
  if (!through_cuda_runtime(on))
    return glass::emu::set_max_dynamic_shared_bytes(reinterpret_cast<const void*>(kernel), name,
                                                    bytes);
#endif
#if defined(GLASS_CUDA_BUILD_SERVES_CUDA)
  int device = 0;
  GLASS_CUDA_CHECK(cudaGetDevice(&device), name);
  int optin = 0;
  GLASS_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                   name);
  // the kernel's static __shared__ bytes count against the same limit
  cudaFuncAttributes attributes{};
  GLASS_CUDA_CHECK(cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)), name);
  if (bytes + attributes.sharedSizeBytes > static_cast<size_t>(optin))
    throw glass::Error("kernel '" + std::string(name) + "': cannot opt into " +
                       std::to_string(bytes) +
                       " bytes of dynamic shared memory per block on top of " +
                       std::to_string(attributes.sharedSizeBytes) +
                       " static: the device's opt-in limit "
                       "(cudaDevAttrMaxSharedMemoryPerBlockOptin) is " +
                       std::to_string(optin) + " bytes on cuda:" + std::to_string(device));
  GLASS_CUDA_CHECK(
      cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
      name);
#endif
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
