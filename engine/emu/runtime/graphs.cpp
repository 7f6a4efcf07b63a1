// Stream capture and CUDA graphs of the emulated runtime (capture.h): cudaStreamBeginCapture,
// cudaStreamEndCapture, cudaStreamIsCapturing, cudaGraphInstantiate, cudaGraphLaunch,
// cudaGraphGetNodes, cudaGraphExecDestroy, cudaGraphDestroy and
// cudaThreadExchangeStreamCaptureMode, under the names of cudart_names.h.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/emu/runtime/capture.h"

// cudaGraph_t and cudaGraphExec_t point to these (incomplete types in the CUDA headers): the
// captured operations, in stream order.
struct CUgraph_st {
  std::vector<glass::emu::runtime::Operation> nodes;
};
struct CUgraphExec_st {
  std::vector<glass::emu::runtime::Operation> nodes;
  int device = 0;
};

namespace glass::emu::runtime {
namespace {

struct Capture {
  unsigned long long id = 0;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  std::unique_ptr<CUgraph_st> graph = std::make_unique<CUgraph_st>();
  std::string invalidated_by;  // the call that broke the capture; empty while it is valid
};

// Under state_mutex(); never destroyed (stream workers may run while static destructors do).
std::map<const CUstream_st*, Capture>& captures = *new std::map<const CUstream_st*, Capture>;
unsigned long long next_capture_id = 1;

// The calling thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode): global
// until the thread exchanges it.
thread_local cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

void invalidate_locked(Capture& c, const char* call) {
  if (!c.invalidated_by.empty()) return;
  c.invalidated_by = call;
  std::fprintf(stderr,
               "glass emulated CUDA runtime: %s is not permitted while a stream is capturing; "
               "the capture is invalidated\n",
               call);
}

}  // namespace

bool is_capturing_locked(const CUstream_st* stream) { return captures.count(stream) != 0; }

bool capture_locked(CUstream_st* stream, Operation& op) {
  auto it = captures.find(stream);
  if (it == captures.end()) return false;
  op.waits.clear();  // within the graph, stream order is the only order
  it->second.graph->nodes.push_back(std::move(op));
  return true;
}

cudaError_t refuse_on_capturing_stream_locked(const CUstream_st* stream, const char* call) {
  auto it = captures.find(stream);
  if (it == captures.end()) return cudaSuccess;
  invalidate_locked(it->second, call);
  return cudaErrorStreamCaptureUnsupported;
}

cudaError_t refuse_unsafe_call(const char* call) {
  std::lock_guard lock(state_mutex());
  const std::thread::id self = std::this_thread::get_id();
  cudaError_t result = cudaSuccess;
  // CUDA's rule, by the calling thread's interaction mode: relaxed may make any call; thread-local
  // conflicts with this thread's own captures that were not begun relaxed; global also with
  // another thread's capture begun in global mode.
  if (thread_mode == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  for (auto& [stream, c] : captures) {
    const bool conflicts = c.thread == self ? c.mode != cudaStreamCaptureModeRelaxed
                                            : thread_mode == cudaStreamCaptureModeGlobal &&
                                                  c.mode == cudaStreamCaptureModeGlobal;
    if (!conflicts) continue;
    invalidate_locked(c, call);
    result = cudaErrorStreamCaptureUnsupported;
  }
  return result;
}

}  // namespace glass::emu::runtime

using namespace glass::emu::runtime;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  // The legacy default stream cannot capture (it synchronises with every blocking stream).
  if (stream == nullptr || stream == cudaStreamLegacy) return cudaErrorStreamCaptureImplicit;
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return cudaErrorInvalidValue;
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  if (is_capturing_locked(s)) return cudaErrorIllegalState;
  Capture& c = captures[s];
  c.id = next_capture_id++;
  c.mode = mode;
  c.thread = std::this_thread::get_id();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return cudaErrorInvalidValue;
  std::lock_guard lock(state_mutex());
  auto it = captures.find(resolve_locked(stream));
  if (it == captures.end()) return cudaErrorIllegalState;  // this stream is not capturing
  if (it->second.mode != cudaStreamCaptureModeRelaxed &&
      it->second.thread != std::this_thread::get_id())
    return cudaErrorStreamCaptureWrongThread;
  const bool invalid = !it->second.invalidated_by.empty();
  *graph = invalid ? nullptr : it->second.graph.release();
  captures.erase(it);
  return invalid ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return cudaErrorInvalidValue;
  std::lock_guard lock(state_mutex());
  auto it = captures.find(resolve_locked(stream));
  *status = it == captures.end()                ? cudaStreamCaptureStatusNone
            : it->second.invalidated_by.empty() ? cudaStreamCaptureStatusActive
                                                : cudaStreamCaptureStatusInvalidated;
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (graph == nullptr || count == nullptr) return cudaErrorInvalidValue;
  if (nodes != nullptr) return cudaErrorNotSupported;  // the emulation counts nodes only
  *count = graph->nodes.size();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (exec == nullptr || graph == nullptr || flags != 0) return cudaErrorInvalidValue;
  auto e = std::make_unique<CUgraphExec_st>();
  e->nodes = graph->nodes;  // an executable graph is a copy: destroying the graph leaves it
  e->device = current_device();
  *exec = e.release();
  return cudaSuccess;
}

// Each node is queued as the operation it was captured as (same name, same memory), so the stream
// checks and the delays of GLASS_EMU_STREAM_DELAY_SEED see a replay as they see eager work.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  if (is_capturing_locked(s)) return cudaErrorNotSupported;  // no graphs inside graphs here
  if (stream_device(s) != exec->device) return cudaErrorInvalidValue;
  if (const cudaError_t e = gpu_locked(exec->device).sticky) return e;
  for (const Operation& node : exec->nodes) push_locked(s, node);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;  // queued replays own copies of the nodes' work
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr) return cudaErrorInvalidValue;
  if (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
      *mode != cudaStreamCaptureModeRelaxed)
    return cudaErrorInvalidValue;
  std::swap(*mode, thread_mode);
  return cudaSuccess;
}

}  // extern "C"
