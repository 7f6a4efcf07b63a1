// launch_cuda_kernel: how a host launcher in kernels/cuda starts its __global__ kernel.
//
// The call goes through the gateway glass::launch (observers see it with the LaunchInfo: name,
// grid, block, shared memory, stream, FLOPs, bytes), and then, in the same source:
// - compiled by nvcc for `cuda`: cudaLaunchKernel with the argument array (never <<<>>>) on the
//   current stream (engine/cuda/stream.h), and the launch error checked at once, naming the
//   kernel and op (engine/cuda/check.h);
// - compiled by the host compiler for `emu` (GLASS_EMU): glass::emu::launch_kernel runs the grid
//   on the CPU, each CUDA thread a fiber. Emu streams are always drained: stream 0.
// - compiled by the host compiler for `cuda` on the emulated CUDA runtime (GLASS_CUDA_RUNTIME_EMU,
//   engine/emu/README.md): the `cuda` path above, byte for byte, after registering a typed
//   trampoline through which that runtime runs the kernel on the emulator.
#pragma once

#include <tuple>
#include <utility>

#include "engine/error.h"
#include "engine/launch.h"
#include "kernels/cuda/build.h"

#if defined(GLASS_EMU)
#include "engine/emu/launch.h"
#else
#include <cuda_runtime.h>

#include "engine/cuda/check.h"
#include "engine/cuda/stream.h"
#if defined(GLASS_CUDA_RUNTIME_EMU) && !defined(__CUDACC__)
#include "emucuda/runtime/kernel_trampoline.h"
#endif
#endif

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

inline unsigned ceil_div(int64_t n, int64_t d) { return static_cast<unsigned>((n + d - 1) / d); }

// The stream kernels and cuBLAS calls go to, and its id for LaunchInfo.stream: the thread's
// current stream on `cuda`, the null stream (id 0) on emu.
inline cudaStream_t launch_stream() {
#if defined(GLASS_EMU)
  return nullptr;
#else
  return glass::cuda::current_stream();
#endif
}

inline int launch_stream_id() {
#if defined(GLASS_EMU)
  return 0;
#else
  return glass::cuda::current_stream_id();
#endif
}

template <class... Params, class... Args>
void launch_cuda_kernel(LaunchInfo info, void (*kernel)(Params...), Args&&... args) {
  const dim3 grid(info.grid.x, info.grid.y, info.grid.z);
  const dim3 block(info.block.x, info.block.y, info.block.z);
#if defined(GLASS_EMU)
  glass::launch(info, [&] {
    glass::emu::launch_kernel(info.kernel, kernel, grid, block, info.shared_bytes,
                              std::forward<Args>(args)...);
  });
#else
  // cudaLaunchKernel takes pointers to the arguments, converted to the parameter types.
  std::tuple<Params...> values(std::forward<Args>(args)...);
  void* argv[sizeof...(Params) + 1];
  std::apply(
      [&](auto&... v) {
        size_t i = 0;
        ((argv[i++] = static_cast<void*>(&v)), ...);
      },
      values);
  const cudaStream_t stream = launch_stream();
  info.stream = launch_stream_id();
  info.native_stream = stream;
  cudaError_t err = cudaSuccess;
#if defined(GLASS_CUDA_RUNTIME_EMU) && !defined(__CUDACC__)
  glass::emu::runtime::register_kernel(kernel, info.kernel);
#endif
  glass::launch(info, [&] {
    err = cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block, argv,
                           info.shared_bytes, stream);
  });
  glass::cuda::check_launch(err, info, stream);
#endif
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
