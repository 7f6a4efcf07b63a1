// CUDA errors as glass::Error. Every CUDA runtime call and every kernel launch of the engine is
// checked, and a failure throws naming what was being done (the kernel, the autograd op and
// node, or the runtime call) and CUDA's own name and text for the error.
//
// No fmt here: nvcc reads this header (through kernels/cuda/kernel_launcher.h); the messages are
// built in check.cpp, compiled by the host compiler.
#pragma once

#include <cuda_runtime_api.h>

#include "engine/launch.h"

namespace glass::cuda {

// Throws glass::Error "<what>: <call> failed: <cudaErrorName> (<text>)" unless err is cudaSuccess.
// Clears CUDA's sticky last-error slot for non-sticky errors (an out-of-memory, say), so that
// the next call does not report it again.
void check(cudaError_t err, const char* call, const char* what);

// After a kernel launch: throws "CUDA launch of kernel 'K' (op O, node N) failed: ..." when the
// launch failed. In synchronous mode (GLASS_CUDA_SYNC=1) it also waits for the kernel
// (on `stream`, the one it was launched on) and reports an error the kernel raised while running
// (an illegal address, a trap) against this kernel, instead of against whatever call happens to
// notice it later.
void check_launch(cudaError_t err, const LaunchInfo& info, cudaStream_t stream);

// Whether GLASS_CUDA_SYNC=1 is set (read once).
bool sync_mode();

}  // namespace glass::cuda

// GLASS_CUDA_CHECK(cudaMalloc(&p, n), "Allocator on cuda:0"): the call, checked.
#define GLASS_CUDA_CHECK(call, what) ::glass::cuda::check((call), #call, (what))
