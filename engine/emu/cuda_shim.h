// Force-included (`-include engine/emu/cuda_shim.h`) into every .cu file compiled under emu, i.e.
// compiled as host C++ by the host compiler. It stands in for what nvcc provides implicitly:
// the CUDA keywords, the built-in variables, and the device intrinsics, all implemented on the
// host by the emulator. Kernels are then ordinary functions launched by launch_kernel().
#pragma once

// GLASS_EMU: this file is host C++ compiled through the shim (kernels/cuda/build.h says which
// devices such a build serves).
#define GLASS_EMU 1

// The keywords must be defined before any CUDA header: without __CUDACC__, crt/host_defines.h
// keeps a user's definition. __host__/__device__/__global__/__constant__ then vanish, and
// __shared__ becomes thread_local (at block scope that implies static): an OS thread runs one
// block at a time, so every block sees one copy, and blocks on other OS threads have their own.
// The variable goes into the section that static_shared.h poisons before every block and
// measures for the per-block shared memory limit.
#define __host__
#define __device__
#define __global__
#define __constant__
#define __managed__
#define __shared__ thread_local __attribute__((section(GLASS_EMU_STATIC_SHARED_SECTION)))
#define __launch_bounds__(...)
// Not __attribute__((noinline)): libstdc++ itself spells __attribute__((__noinline__)).
#define __noinline__

#include "engine/emu/static_shared.h"

#include <vector_functions.h>
#include <vector_types.h>

#include "engine/emu/builtins.h"
#include "engine/emu/dynamic_shared.h"
#include "engine/emu/intrinsics_atomic.h"
#include "engine/emu/intrinsics_math.h"
#include "engine/emu/intrinsics_sync.h"
