// Declarations of the `cpu` kernels; backend_cpu.cpp puts them into the dispatch table.
// Each kernel's contract is documented once, on its entry in kernels/kernel_list.inc.
#pragma once

#include "kernels/backend.h"

namespace glass::kernels::cpu {

// The kernels of kernels/kernel_list.inc that exist on cpu (`every`).
#define GLASS_KERNEL(kernel, on, params) GLASS_CPU_DECLARE_##on(kernel, params)
#define GLASS_CPU_DECLARE_every(kernel, params) void kernel params;
#define GLASS_CPU_DECLARE_emu_cuda(kernel, params)
#define GLASS_CPU_DECLARE_cudnn(kernel, params)
#include "kernels/kernel_list.inc"
#undef GLASS_CPU_DECLARE_every
#undef GLASS_CPU_DECLARE_emu_cuda
#undef GLASS_CPU_DECLARE_cudnn

}  // namespace glass::kernels::cpu
