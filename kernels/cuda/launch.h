// launch_cuda_kernel: how a host launcher in kernels/cuda starts its __global__ kernel.
//
// The call goes through the gateway glass::launch (observers see it with the LaunchInfo: name,
// grid, block, shared memory, FLOPs, bytes), and then, in the same source:
// - compiled by nvcc for `cuda`: cudaLaunchKernel with the argument array (never <<<>>>), and the
//   launch error checked at once, naming the kernel;
// - compiled by the host compiler for `emu` (GLASS_EMU): glass::emu::launch_kernel runs the grid
//   on the CPU, each CUDA thread a fiber.
#pragma once

#include "engine/error.h"
#include "engine/launch.h"

#if defined(GLASS_EMU)
#include "engine/emu/launch.h"
#else
#include <cuda_runtime.h>
#endif

namespace glass::kernels::cuda {

inline unsigned ceil_div(int64_t n, int64_t d) { return static_cast<unsigned>((n + d - 1) / d); }

template <class... Params, class... Args>
void launch_cuda_kernel(LaunchInfo info, void (*kernel)(Params...), Args&&... args) {
  const dim3 grid(info.grid.x, info.grid.y, info.grid.z);
  const dim3 block(info.block.x, info.block.y, info.block.z);
  glass::launch(info, [&] {
#if defined(GLASS_EMU)
    glass::emu::launch_kernel(info.kernel, kernel, grid, block, info.shared_bytes,
                              std::forward<Args>(args)...);
#else
    // cudaLaunchKernel takes pointers to the arguments, converted to the parameter types.
    std::tuple<Params...> values(std::forward<Args>(args)...);
    void* argv[sizeof...(Params) + 1];
    std::apply([&](auto&... v) {
      size_t i = 0;
      ((argv[i++] = static_cast<void*>(&v)), ...);
    }, values);
    const cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void*>(kernel), grid, block,
                                             argv, info.shared_bytes, nullptr);
    GLASS_CHECK(err == cudaSuccess, "CUDA launch of kernel '{}' (op {}, node {}) failed: {}",
                info.kernel, info.op, info.node_id, cudaGetErrorString(err));
#endif
  });
}

}  // namespace glass::kernels::cuda
