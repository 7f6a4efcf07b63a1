// GLASS_DYNAMIC_SHARED(T, name): the block's dynamic shared memory as `T* name`, for kernel
// sources that are compiled both by nvcc and under emu. Include this header in such a kernel.
//
//   __global__ void reverse(const int* x, int* y) {
//     GLASS_DYNAMIC_SHARED(int, s);   // instead of: extern __shared__ int s[];
//     ...
//   }
//
// Under nvcc it is the usual `extern __shared__` array, declared as bytes so that kernels in
// one file may view it with different element types. `extern __shared__` cannot be emulated
// (it would be an undefined thread_local symbol), hence the macro.
#pragma once

#if defined(GLASS_EMU)  // host-compiled through the shim
#include "engine/emu/device_runtime.h"
#define GLASS_DYNAMIC_SHARED(T, name) \
  T* name = static_cast<T*>(::glass::emu::detail::dynamic_shared_memory())
#else
#define GLASS_DYNAMIC_SHARED(T, name)                                    \
  extern __shared__ __align__(16) unsigned char glass_dynamic_shared_[]; \
  T* name = reinterpret_cast<T*>(glass_dynamic_shared_)
#endif
