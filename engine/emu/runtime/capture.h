// Stream capture and CUDA graphs in the emulated runtime (graphs.cpp): the hooks that streams.cpp
// and cudart.cpp call. A stream between cudaStreamBeginCapture and cudaStreamEndCapture runs
// nothing: every operation pushed on it (kernel, copy, memset, event record, an emulated cuBLAS
// or NCCL call) becomes the next node of the capture's graph, in order. cudaGraphLaunch queues
// the nodes of an instantiated graph on a stream, in that order, every time it is called, so
// the emulation of a replay is the captured operations run again with the arguments they were
// captured with (a graph is a straight line: one capturing stream, no fork or join).
//
// Calls that cannot be captured fail as CUDA's do, with cudaErrorStreamCaptureUnsupported
// ("operation not permitted when stream is capturing"), and invalidate the capture, so that its
// cudaStreamEndCapture returns cudaErrorStreamCaptureInvalidated and no graph.
#pragma once

#include <cuda_runtime_api.h>

#include "engine/emu/runtime/streams.h"

namespace glass::emu::runtime {

// If `stream` is capturing, appends `op` to its graph and returns true: the caller queues nothing
// (caller holds state_mutex()).
bool capture_locked(CUstream_st* stream, Operation& op);
bool is_capturing_locked(const CUstream_st* stream);

// A call that synchronises `stream` or waits for its work (cudaStreamSynchronize, cudaStreamQuery,
// a copy to or from pageable host memory on it): not permitted while `stream` captures, in any
// mode. Returns cudaErrorStreamCaptureUnsupported and invalidates that capture, or cudaSuccess
// (caller holds state_mutex()).
cudaError_t refuse_on_capturing_stream_locked(const CUstream_st* stream, const char* call);

// A "potentially unsafe" call (cudaMalloc, cudaFree, cudaHostAlloc, cudaDeviceSynchronize, a
// synchronous cudaMemcpy or cudaMemset), judged by the calling thread's interaction mode
// (cudaThreadExchangeStreamCaptureMode; global unless exchanged): refused while the thread has a
// capture that was not begun in cudaStreamCaptureModeRelaxed (global and thread-local modes), or
// another thread has one begun in cudaStreamCaptureModeGlobal (global mode); a thread in relaxed
// mode may make any of them (CUDA's rule). Returns cudaErrorStreamCaptureUnsupported
// and invalidates those captures, or cudaSuccess (takes state_mutex()).
cudaError_t refuse_unsafe_call(const char* call);

}  // namespace glass::emu::runtime
