// Host launchers of the CUDA kernels (kernels/cuda/*.cu). The same sources build the `cuda` table
// (nvcc) and the `emu` table (host compiler + engine/emu), each in its own inline namespace
// (build.h); backend_table.cu, compiled in both builds, puts them into the dispatch table.
// Each kernel's contract is documented once, on its entry in kernels/backend.h.
#pragma once

#include "kernels/backend.h"
#include "kernels/cuda/build.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

#include "kernels/kernel_functions.inc"

void check_gemm_args(const GemmArgs& args);  // throws naming what gemm() would refuse

// classifier.cu: checks cross-entropy targets on the device (a target outside [0, vocab) that is
// not ignore_index raises a device flag naming `kernel`, row and value) and, when `valid` is not
// null, writes there the number of rows whose target counts. Never waits for the device.
void check_targets(const char* kernel, const Tensor& targets, int64_t vocab, int64_t ignore_index,
                   float* valid);

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
