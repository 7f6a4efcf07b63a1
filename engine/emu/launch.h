// Launching a kernel on the emulator: the stand-in for kernel<<<grid, block, smem>>>(args...).
//
// Execution model: the blocks of a grid are spread over a pool of OS threads (Settings::
// worker_threads, the launching thread included). Each block runs on one OS thread, its CUDA
// threads one after another; a thread that blocks (barrier, warp operation) is parked on a fiber
// and the next thread starts, so a kernel that never blocks runs as a plain loop. Launches are
// synchronous: when launch_kernel returns, the grid has finished.
#pragma once

#include <vector_types.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace glass::emu {

// What a launch cost in fiber machinery; tests and benchmarks read it.
struct LaunchStats {
  uint64_t context_switches = 0;  // 0: no thread ever blocked, the grid ran as plain loops
  uint64_t fibers_created = 0;    // stacks mapped by this launch; 0 once the pool is warm
};

namespace detail {

// A kernel as the scheduler sees it: a callable that runs one CUDA thread.
struct KernelBody {
  void (*invoke)(const void* object);
  const void* object;
};

LaunchStats run_grid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                     KernelBody body);

}  // namespace detail

// Runs body() once for every CUDA thread of the grid; threadIdx, blockIdx, blockDim and gridDim
// tell each call which thread it is. `body` is called from several OS threads at once.
// Throws EmuError naming `kernel` when the configuration is invalid, a thread throws (the
// original exception is nested), the threads of a block deadlock, or, with
// Settings::check_memory, the kernel wrote outside a device allocation.
template <class Body>
requires std::invocable<const Body&> LaunchStats launch_kernel(const char* kernel, dim3 grid,
                                                               dim3 block,
                                                               size_t dynamic_shared_bytes,
                                                               const Body& body) {
  return detail::run_grid(kernel, grid, block, dynamic_shared_bytes,
                          {[](const void* b) { (*static_cast<const Body*>(b))(); }, &body});
}

// Launches a __global__ function. Like cudaLaunchKernel, the arguments are converted to the
// parameter types once, and every CUDA thread receives its own copy of the parameters.
template <class... Params, class... Args>
LaunchStats launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                          size_t dynamic_shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  return launch_kernel(name, grid, block, dynamic_shared_bytes,
                       [&] { std::apply(kernel, params); });
}

}  // namespace glass::emu
