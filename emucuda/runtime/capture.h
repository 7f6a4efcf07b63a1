// Stream capture and CUDA graphs in the emulated runtime (graphs.cpp): the hooks that streams.cpp
// and cudart.cpp call. A stream between cudaStreamBeginCapture and cudaStreamEndCapture runs
// nothing: every operation pushed on it (kernel, copy, memset, event record, an emulated cuBLAS
// or NCCL call) becomes the next node of the capture's graph.
//
// Fork and join, as CUDA defines them: while stream S captures, an event recorded on S and then
// waited for by another stream T (cudaStreamWaitEvent) pulls T into the same capture, and T's
// operations from then on are nodes of S's graph too (captured, not run), each depending on the
// nodes before it on T and on the nodes the event stood for. An event recorded on T and waited
// for by S joins T back. cudaStreamEndCapture must be called on S, the stream that began the
// capture (cudaErrorStreamCaptureUnmatched otherwise), and fails with
// cudaErrorStreamCaptureUnjoined when some node is not an ancestor of S's last node (a forked
// stream whose work was not joined back, directly or through another joined stream); either way
// every stream of the capture stops capturing. A stream of one capture waiting for an event of
// another is cudaErrorStreamCaptureMerge.
//
// Replay: the graph keeps its nodes in the order the host issued them, over all its streams, each
// with the dependencies it was captured with and its branch (the capture's stream it was issued
// on: the origin, or a fork). cudaGraphInstantiate gives each forked branch a stream of its own;
// cudaGraphLaunch queues the origin's nodes on the stream it is given and each branch's on its
// stream, with the captured operations' arguments, a node waiting for the nodes of other branches
// it depends on. So the branches run concurrently, as a GPU may run them, and a dependency the
// capture left out is a race at the replay too (a wrong result; a report under
// GLASS_EMU_STREAM_CHECK; likelier under GLASS_EMU_STREAM_DELAY_SEED), where running the nodes in
// issue order would have hidden it. Every branch starts after the work queued before the launch,
// and work queued after it waits for every branch.
//
// Calls that cannot be captured fail as CUDA's do, with cudaErrorStreamCaptureUnsupported
// ("operation not permitted when stream is capturing"), and invalidate the capture, so that its
// cudaStreamEndCapture returns cudaErrorStreamCaptureInvalidated and no graph.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "emucuda/runtime/streams.h"

namespace glass::emu::runtime {

// If `stream` is capturing, appends `op` to its graph and returns true: the caller queues nothing
// (caller holds state_mutex()).
bool capture_locked(CUstream_st* stream, Operation& op);
bool is_capturing_locked(const CUstream_st* stream);

// Where an event recorded on a capturing stream stands in the capture: the capture's id (0: the
// event was not recorded in a capture) and the nodes a wait for it depends on.
struct CapturedEvent {
  unsigned long long capture = 0;
  std::vector<size_t> nodes;
};
// What an event recorded now on `stream` stands for: {0, {}} when `stream` is not capturing
// (caller holds state_mutex()).
CapturedEvent captured_event_locked(const CUstream_st* stream);
// Whether capture `id` is still going on (caller holds state_mutex()).
bool capture_active_locked(unsigned long long id);
// cudaStreamWaitEvent(stream, event) for an event recorded in the active capture `event.capture`:
// forks `stream` into that capture, or (already in it) adds the event's nodes to what its next
// node depends on. cudaErrorStreamCaptureMerge when `stream` is in another capture,
// cudaErrorStreamCaptureImplicit for the legacy default stream (caller holds state_mutex()).
cudaError_t wait_in_capture_locked(CUstream_st* stream, const CapturedEvent& event);
// A host wait for an event recorded in the active capture `id` (cudaEventQuery,
// cudaEventSynchronize): refused like refuse_on_capturing_stream_locked (caller holds
// state_mutex()).
cudaError_t refuse_event_of_capture_locked(unsigned long long id, const char* call);

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
