// When an emulated cuBLAS or cuBLASLt call does its work: the one rule both libraries follow.
//
// The real libraries only queue a GEMM on the handle's stream; it runs after the work queued ahead
// of it, and the host must not read its output before a synchronisation. A handle made by
// glass_emu_cublas(Lt)CreateStreamOrdered does the same on the emulated CUDA runtime (the cuda
// device under GLASS_CUDA_RUNTIME=emu). A plain handle (the emu device, which runs each launch at
// the call) does the work at once.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "emucuda/cublas/cublas_v2.h"
#include "emucuda/runtime/runtime.h"

namespace glass::emu::cublas {

// Runs `work` now, or queues it on `stream` with the device memory it reads and writes (the
// runtime's stream checks compare them). A failed enqueue (a sticky fault, a stream being
// destroyed) is what the real library reports: an execution failure.
inline cublasStatus_t run_in_stream_order(bool stream_ordered, cudaStream_t stream,
                                          std::string what, std::vector<runtime::Access> accesses,
                                          std::function<void()> work) {
  if (!stream_ordered) {
    work();
    return CUBLAS_STATUS_SUCCESS;
  }
  const cudaError_t queued =
      runtime::enqueue(stream, std::move(what), std::move(accesses), std::move(work));
  return queued == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

}  // namespace glass::emu::cublas
