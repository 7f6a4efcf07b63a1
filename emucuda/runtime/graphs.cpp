// Stream capture and CUDA graphs of the emulated runtime (capture.h): cudaStreamBeginCapture,
// cudaStreamEndCapture, cudaStreamIsCapturing, cudaGraphInstantiate, cudaGraphLaunch,
// cudaGraphGetNodes, cudaGraphExecDestroy, cudaGraphDestroy and
// cudaThreadExchangeStreamCaptureMode, under the names of cudart_names.h.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "emucuda/runtime/capture.h"

// cudaGraph_t and cudaGraphExec_t point to these (incomplete types in the CUDA headers): the
// captured operations in the order the host issued them, each with its branch and the nodes it
// depends on (capture.h: the replay).
struct CUgraph_st {
  std::vector<glass::emu::runtime::Operation> nodes;
  std::vector<std::vector<size_t>> depends_on;  // per node: the nodes it waits for
  std::vector<size_t> branch;  // per node: the capture's stream it was issued on, 0 the origin
};
// An executable graph: a copy of the graph, and a stream of its own for each branch but the
// first, which runs on the stream the graph is launched on.
struct CUgraphExec_st {
  CUgraph_st graph;
  std::vector<CUstream_st*> branch_streams;  // branch b > 0 runs on branch_streams[b - 1]
  int device = 0;
};

namespace glass::emu::runtime {
namespace {

struct Capture {
  unsigned long long id = 0;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  const CUstream_st* origin = nullptr;  // the stream that began it, the one to end it
  std::unique_ptr<CUgraph_st> graph = std::make_unique<CUgraph_st>();
  // Per stream of the capture (the origin and the streams forked into it): the nodes its next
  // node will depend on (its last node, and the nodes of the events it waited for since), and
  // its branch number (the origin 0, then the forks in the order they joined the capture).
  std::map<const CUstream_st*, std::vector<size_t>> next_depends_on;
  std::map<const CUstream_st*, size_t> branch_of;
  std::string invalidated_by;  // the call that broke the capture; empty while it is valid

  // Whether every node is the origin's last node or one of its ancestors: every forked stream
  // was joined back.
  bool joined() const {
    std::vector<bool> reached(graph->nodes.size(), false);
    std::vector<size_t> todo = next_depends_on.at(origin);
    while (!todo.empty()) {
      const size_t n = todo.back();
      todo.pop_back();
      if (reached[n]) continue;
      reached[n] = true;
      todo.insert(todo.end(), graph->depends_on[n].begin(), graph->depends_on[n].end());
    }
    return std::find(reached.begin(), reached.end(), false) == reached.end();
  }
};

// Every stream of an active capture (its origin and the streams forked into it), under
// state_mutex(); never destroyed (stream workers may run while static destructors do).
std::map<const CUstream_st*, std::shared_ptr<Capture>>& captures =
    *new std::map<const CUstream_st*, std::shared_ptr<Capture>>;
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

std::shared_ptr<Capture> capture_by_id_locked(unsigned long long id) {
  for (const auto& [stream, c] : captures)
    if (c->id == id) return c;
  return nullptr;
}

// Ends capture `c` for every stream in it.
void end_capture_locked(const Capture& c) {
  std::erase_if(captures, [&](const auto& entry) { return entry.second.get() == &c; });
}

// a ∪= b, kept sorted and without repeats.
void add_nodes(std::vector<size_t>& a, const std::vector<size_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
}

}  // namespace

bool is_capturing_locked(const CUstream_st* stream) { return captures.count(stream) != 0; }

bool capture_locked(CUstream_st* stream, Operation& op) {
  auto it = captures.find(stream);
  if (it == captures.end()) return false;
  Capture& c = *it->second;
  op.waits.clear();  // within the graph, the captured dependencies are the only order
  std::vector<size_t>& next = c.next_depends_on[stream];
  CUgraph_st& g = *c.graph;
  g.depends_on.push_back(std::move(next));
  next = {g.nodes.size()};
  g.branch.push_back(c.branch_of.emplace(stream, c.branch_of.size()).first->second);
  g.nodes.push_back(std::move(op));
  return true;
}

CapturedEvent captured_event_locked(const CUstream_st* stream) {
  auto it = captures.find(stream);
  if (it == captures.end()) return {};
  return {it->second->id, it->second->next_depends_on[stream]};
}

bool capture_active_locked(unsigned long long id) { return capture_by_id_locked(id) != nullptr; }

cudaError_t wait_in_capture_locked(CUstream_st* stream, const CapturedEvent& event) {
  const std::shared_ptr<Capture> c = capture_by_id_locked(event.capture);
  if (c == nullptr) return cudaSuccess;  // that capture has ended: nothing to wait for
  auto it = captures.find(stream);
  if (it != captures.end() && it->second != c) {
    invalidate_locked(*it->second, "cudaStreamWaitEvent on an event of another capture");
    invalidate_locked(*c, "cudaStreamWaitEvent on an event of another capture");
    return cudaErrorStreamCaptureMerge;
  }
  if (it == captures.end()) {
    // The legacy default stream synchronises with every blocking stream: it cannot join.
    if (stream == gpu_locked(stream_device(stream)).legacy) {
      invalidate_locked(*c, "cudaStreamWaitEvent of the legacy default stream");
      return cudaErrorStreamCaptureImplicit;
    }
    captures[stream] = c;  // the fork
  }
  add_nodes(c->next_depends_on[stream], event.nodes);
  return cudaSuccess;
}

cudaError_t refuse_event_of_capture_locked(unsigned long long id, const char* call) {
  const std::shared_ptr<Capture> c = capture_by_id_locked(id);
  if (c == nullptr) return cudaSuccess;
  invalidate_locked(*c, call);
  return cudaErrorStreamCaptureUnsupported;
}

cudaError_t refuse_on_capturing_stream_locked(const CUstream_st* stream, const char* call) {
  auto it = captures.find(stream);
  if (it == captures.end()) return cudaSuccess;
  invalidate_locked(*it->second, call);
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
    const bool conflicts = c->thread == self ? c->mode != cudaStreamCaptureModeRelaxed
                                             : thread_mode == cudaStreamCaptureModeGlobal &&
                                                   c->mode == cudaStreamCaptureModeGlobal;
    if (!conflicts) continue;
    invalidate_locked(*c, call);
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
  auto c = std::make_shared<Capture>();
  c->id = next_capture_id++;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->origin = s;
  c->next_depends_on[s] = {};
  c->branch_of[s] = 0;
  captures[s] = c;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return cudaErrorInvalidValue;
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  auto it = captures.find(s);
  if (it == captures.end()) return cudaErrorIllegalState;  // this stream is not capturing
  const std::shared_ptr<Capture> c = it->second;
  if (c->origin != s) {  // a stream forked into the capture: only its origin ends it
    invalidate_locked(*c, "cudaStreamEndCapture on a stream the capture was not begun on");
    return cudaErrorStreamCaptureUnmatched;
  }
  if (c->mode != cudaStreamCaptureModeRelaxed && c->thread != std::this_thread::get_id())
    return cudaErrorStreamCaptureWrongThread;
  end_capture_locked(*c);
  *graph = nullptr;
  if (!c->invalidated_by.empty()) return cudaErrorStreamCaptureInvalidated;
  if (!c->joined()) {
    std::fprintf(stderr,
                 "glass emulated CUDA runtime: cudaStreamEndCapture: a stream forked into the "
                 "capture was not joined back to the stream that began it\n");
    return cudaErrorStreamCaptureUnjoined;
  }
  *graph = c->graph.release();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return cudaErrorInvalidValue;
  std::lock_guard lock(state_mutex());
  auto it = captures.find(resolve_locked(stream));
  *status = it == captures.end()                 ? cudaStreamCaptureStatusNone
            : it->second->invalidated_by.empty() ? cudaStreamCaptureStatusActive
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
  e->graph = *graph;  // an executable graph is a copy: destroying the graph leaves it
  e->device = current_device();
  const size_t branches =
      graph->branch.empty() ? 1 : *std::max_element(graph->branch.begin(), graph->branch.end()) + 1;
  for (size_t b = 1; b < branches; ++b)
    e->branch_streams.push_back(create_stream(e->device, /*non_blocking=*/true));
  *exec = e.release();
  return cudaSuccess;
}

// Each node is queued as the operation it was captured as (same name, same memory), so the stream
// checks and the delays of GLASS_EMU_STREAM_DELAY_SEED see a replay as they see eager work. The
// origin's nodes go on `stream`, each forked branch's on a stream of the executable graph, and a
// node that depends on a node of another branch waits for it there, as on a GPU: the branches run
// concurrently, so a dependency the capture missed shows up as a race (a wrong result, or a report
// of the stream check), not hidden by running every node in issue order. Every branch starts after
// the work queued on `stream` before the launch, and work queued on `stream` after it waits for
// every branch.
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  if (is_capturing_locked(s)) return cudaErrorNotSupported;  // no graphs inside graphs here
  if (stream_device(s) != exec->device) return cudaErrorInvalidValue;
  if (const cudaError_t e = gpu_locked(exec->device).sticky) return e;
  const CUgraph_st& g = exec->graph;
  const auto stream_of = [&](size_t branch) {
    return branch == 0 ? s : exec->branch_streams[branch - 1];
  };
  Operation launch;
  launch.what = "cudaGraphLaunch";
  const Dependency before = push_locked(s, std::move(launch));
  std::vector<Dependency> queued(g.nodes.size());
  const size_t branches = exec->branch_streams.size() + 1;
  std::vector<std::optional<Dependency>> last_of_branch(branches);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Operation op = g.nodes[n];
    const size_t branch = g.branch[n];
    for (const size_t d : g.depends_on[n])
      if (g.branch[d] != branch) op.waits.push_back(queued[d]);
    if (branch != 0 && !last_of_branch[branch]) op.waits.push_back(before);
    queued[n] = push_locked(stream_of(branch), std::move(op));
    last_of_branch[branch] = queued[n];
  }
  for (size_t b = 1; b < branches; ++b)
    if (last_of_branch[b]) push_wait_locked(s, *last_of_branch[b]);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (exec == nullptr) return cudaErrorInvalidValue;
  // the branch streams run what replays queued on them (their own copies of the nodes' work)
  for (CUstream_st* branch : exec->branch_streams) destroy_stream(branch);
  delete exec;
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
