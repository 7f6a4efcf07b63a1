// Declarations of the `cpu` kernels; backend_cpu.cpp puts them into the dispatch table.
// Each kernel's contract is documented once, on its entry in kernels/backend.h.
#pragma once

#include "kernels/backend.h"

namespace glass::kernels::cpu {

#include "kernels/kernel_functions.inc"

}  // namespace glass::kernels::cpu
