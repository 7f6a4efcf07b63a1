// launch_cuda_kernel: how a host launcher in kernels/cuda starts its __global__ kernel.
//
// The call goes through the gateway glass::launch (observers see it with the LaunchInfo: name,
// grid, block, shared memory, stream, FLOPs, bytes), and then takes one of two paths, chosen by
// the launch's device (build.h says which build serves which device):
// - `cuda`: cudaLaunchKernel with the argument array (never <<<>>>) on the current stream
//   (engine/cuda/stream.h), and the launch error checked at once, naming the kernel and op
//   (engine/cuda/check.h). Compiled by nvcc this is the GPU; compiled by the host compiler on the
//   emulated CUDA runtime (GLASS_CUDA_RUNTIME_EMU, engine/emu/README.md) it is the same code,
//   after registering a typed trampoline through which that runtime runs the kernel on the
//   emulator, in stream order.
// - `emu` (and `meta`, whose gateway only reports the launch): glass::emu::launch_kernel runs the
//   grid on the CPU at once, each CUDA thread a fiber. Emu streams are always drained: stream 0.
#pragma once

#include <tuple>
#include <utility>

#include "engine/error.h"
#include "engine/launch.h"
#include "kernels/cuda/build.h"

#if !defined(__CUDACC__)
#include <driver_types.h>  // cudaStream_t, from the CUDA headers as they are

#include "engine/emu/launch.h"
#endif
#if defined(GLASS_CUDA_BUILD_SERVES_CUDA)
#include <cuda_runtime.h>

#include "engine/cuda/check.h"
#include "engine/cuda/stream.h"
#if !defined(__CUDACC__)
#include "emucuda/runtime/kernel_trampoline.h"
#endif
#endif

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

inline unsigned ceil_div(int64_t n, int64_t d) { return static_cast<unsigned>((n + d - 1) / d); }

// Whether work for `device` goes through the CUDA runtime (streams, cudaLaunchKernel, stream-
// ordered cuBLAS handles): nvcc's build serves `cuda` alone; the host compiler's build serves
// `cuda` that way on the emulated runtime, and runs `emu` and `meta` on the emulator directly.
inline bool through_cuda_runtime([[maybe_unused]] Device device) {
#if defined(__CUDACC__)
  return true;
#elif defined(GLASS_CUDA_BUILD_SERVES_CUDA)
  return device.kind == DeviceKind::cuda;
#else
  return false;
#endif
}

// The stream kernels and cuBLAS calls for `device` go to, and its id for LaunchInfo.stream: the
// thread's current stream on `cuda`, the null stream (id 0) on emu.
inline cudaStream_t launch_stream([[maybe_unused]] Device device) {
#if defined(GLASS_CUDA_BUILD_SERVES_CUDA)
  if (through_cuda_runtime(device)) return glass::cuda::current_stream();
#endif
  return nullptr;
}

inline int launch_stream_id([[maybe_unused]] Device device) {
#if defined(GLASS_CUDA_BUILD_SERVES_CUDA)
  if (through_cuda_runtime(device)) return glass::cuda::current_stream_id();
#endif
  return 0;
}

#if !defined(__CUDACC__)
// emu: the emulator runs the grid now, on this thread's call.
template <class... Params, class... Args>
void launch_on_emulator(const LaunchInfo& info, void (*kernel)(Params...), Args&&... args) {
  GLASS_CHECK(info.device.kind == DeviceKind::emu || info.device.kind == DeviceKind::meta,
              "kernel '{}': its LaunchInfo names device {}, not an emu or meta device (the "
              "launcher did not set LaunchInfo::device)",
              info.kernel, info.device.str());
  const dim3 grid(info.grid.x, info.grid.y, info.grid.z);
  const dim3 block(info.block.x, info.block.y, info.block.z);
  glass::launch(info, [&] {
    glass::emu::launch_kernel(info.kernel, kernel, grid, block, info.shared_bytes,
                              std::forward<Args>(args)...);
  });
}
#endif

#if defined(GLASS_CUDA_BUILD_SERVES_CUDA)
// cuda: queued on the current stream through the CUDA runtime.
template <class... Params, class... Args>
void launch_through_cuda_runtime(LaunchInfo info, void (*kernel)(Params...), Args&&... args) {
  const dim3 grid(info.grid.x, info.grid.y, info.grid.z);
  const dim3 block(info.block.x, info.block.y, info.block.z);
  // cudaLaunchKernel takes pointers to the arguments, converted to the parameter types.
  std::tuple<Params...> values(std::forward<Args>(args)...);
  void* argv[sizeof...(Params) + 1];
  std::apply(
      [&](auto&... v) {
        size_t i = 0;
        ((argv[i++] = static_cast<void*>(&v)), ...);
      },
      values);
  const cudaStream_t stream = launch_stream(info.device);
  info.stream = launch_stream_id(info.device);
  info.native_stream = stream;
  cudaError_t err = cudaSuccess;
#if !defined(__CUDACC__)
  glass::emu::runtime::register_kernel(kernel, info.kernel);
#endif
  glass::launch(info, [&] {
    err = cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, argv,
                           info.shared_bytes, stream);
  });
  glass::cuda::check_launch(err, info, stream);
}
#endif

template <class... Params, class... Args>
void launch_cuda_kernel(const LaunchInfo& info, void (*kernel)(Params...), Args&&... args) {
#if defined(GLASS_CUDA_BUILD_SERVES_CUDA)
  if (through_cuda_runtime(info.device))
    return launch_through_cuda_runtime(info, kernel, std::forward<Args>(args)...);
#endif
#if !defined(__CUDACC__)
  launch_on_emulator(info, kernel, std::forward<Args>(args)...);
#endif
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
