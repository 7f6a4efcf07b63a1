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
#include <vector>

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

// What the launch checks know of a kernel's arguments: the __global__ function (the key of its
// shared memory opt-in, null for a lambda body) and the pointers among its parameters, so that
// GLASS_EMU_RACECHECK / GLASS_EMU_INITCHECK know which device memory the kernel can reach.
struct PointerArgument {
  const void* pointer;
  bool writable;  // not a pointer to const
};
struct KernelArguments {
  const void* function = nullptr;
  std::vector<PointerArgument> pointers;
  bool opaque = true;  // a lambda body or a class-type parameter: it may reach any allocation
};

template <class P>
void describe_argument(KernelArguments& a, const P& value) {
  if constexpr (std::is_pointer_v<P>) {
    if (value)
      a.pointers.push_back(
          {static_cast<const void*>(value), !std::is_const_v<std::remove_pointer_t<P>>});
  } else if constexpr (std::is_class_v<P> || std::is_union_v<P>) {
    a.opaque = true;
  }
}

LaunchStats run_grid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                     KernelBody body, const KernelArguments& arguments);

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
                          {[](const void* b) { (*static_cast<const Body*>(b))(); }, &body},
                          detail::KernelArguments{});
}

// Launches a __global__ function. Like cudaLaunchKernel, the arguments are converted to the
// parameter types once, and every CUDA thread receives its own copy of the parameters.
// `kernel` is also the key of its shared memory opt-in (shared_memory_limits.h).
template <class... Params, class... Args>
LaunchStats launch_kernel(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block,
                          size_t dynamic_shared_bytes, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  detail::KernelArguments arguments{
      .function = reinterpret_cast<const void*>(kernel), .pointers = {}, .opaque = false};
  std::apply([&](const auto&... p) { (detail::describe_argument(arguments, p), ...); }, params);
  const auto body = [&] { std::apply(kernel, params); };
  return detail::run_grid(
      name, grid, block, dynamic_shared_bytes,
      {[](const void* b) { (*static_cast<const decltype(body)*>(b))(); }, &body}, arguments);
}

}  // namespace glass::emu
