// The typed trampoline through which the emulated CUDA runtime runs a __global__ function that
// cudaLaunchKernel received as `const void*` with an array of argument pointers: instantiated for
// the kernel's parameter types by launch_cuda_kernel (kernels/cuda/kernel_launcher.h), it copies
// the arguments (as the GPU does at launch) and runs the grid later on the emulator, from the
// stream's worker.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "emucuda/runtime/runtime.h"
#include "engine/emu/launch.h"

namespace glass::emu::runtime {

template <class... Params>
struct KernelTrampoline {
  using Kernel = void (*)(Params...);

  static std::function<void()> bind(const void* function, const char* name, dim3 grid, dim3 block,
                                    size_t shared, void** args) {
    return bind_args(reinterpret_cast<Kernel>(const_cast<void*>(function)), name, grid, block,
                     shared, args, std::index_sequence_for<Params...>{});
  }

  // Pointer parameters: written unless they point to const.
  static void accesses(void** args, std::vector<Access>& out) {
    size_t i = 0;
    (add<std::decay_t<Params>>(args[i++], out), ...);
  }

 private:
  template <size_t... I>
  static std::function<void()> bind_args(Kernel kernel, const char* name, dim3 grid, dim3 block,
                                         size_t shared, void** args, std::index_sequence<I...>) {
    std::tuple<std::decay_t<Params>...> values(
        *static_cast<const std::decay_t<Params>*>(args[I])...);
    return [=, name = std::string(name)] {
      std::apply(
          [&](const auto&... v) {
            glass::emu::launch_kernel(name.c_str(), kernel, grid, block, shared, v...);
          },
          values);
    };
  }

  template <class P>
  static void add(void* arg, std::vector<Access>& out) {
    if constexpr (std::is_pointer_v<P>)
      out.push_back({*static_cast<const P*>(arg), !std::is_const_v<std::remove_pointer_t<P>>});
  }
};

// Called by launch_cuda_kernel before cudaLaunchKernel.
template <class... Params>
void register_kernel(void (*kernel)(Params...), const char* name) {
  register_kernel(reinterpret_cast<const void*>(kernel), name, &KernelTrampoline<Params...>::bind,
                  &KernelTrampoline<Params...>::accesses);
}

}  // namespace glass::emu::runtime
