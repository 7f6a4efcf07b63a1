// A CUDA graph of the cuda device: the work one piece of host code queues (a training step),
// captured once on the GPU's graph stream and replayed with one cudaGraphLaunch each time.
//
// Capture records, it does not run: between cudaStreamBeginCapture and cudaStreamEndCapture every
// kernel, cuBLAS call, copy and memset queued on the stream becomes a node of the graph, with the
// pointers and scalar arguments it had. A replay runs the same nodes with the same arguments, so
// what changes from one replay to the next must live in device memory the graph reads (the
// batch's tensors, the optimizer's step scalars), written before the replay on the same stream;
// and the captured code may not make the host wait (read_to_host, synchronize), upload from host
// memory: each throws glass::Error naming the call and the op being captured (engine/launch.h:
// refuse_in_graph_capture).
//
// Memory: the graph owns a private pool of the caching allocator (engine/allocator.h) for its
// life. During the capture every allocation of the capturing thread comes from that pool; a miss
// takes over a shared cached block freed on the graph's stream (a warm-up's working memory, which
// is then not reserved twice), else fresh memory (cudaMalloc in relaxed capture mode, which CUDA
// permits during a capture: the allocation is not a node), so a capture needs no warm cache.
// Every block freed during the capture goes to the pool (also one allocated before it), reused
// only by later allocations of the same capture, which is the order of every replay. Outside the
// capture no request gets a pool block, so eager work between replays never shares memory the graph
// writes. Tensors made before the capture that the graph reads or writes (its inputs, the weights)
// are the caller's to keep alive as long as the graph.
//
// Instrumentation: the gateway (glass::launch) records each captured launch's LaunchInfo instead
// of telling the observers; every replay() then reports each of them, in order, with
// LaunchInfo.graph = id() and zero duration at the time of the replay (a graph's kernels are not
// timed one by one). So a trace shows every kernel of every replayed step.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/cuda/stream.h"
#include "engine/launch.h"

namespace glass::cuda {

class Graph {
 public:
  // A graph on the current GPU, captured and replayed on that GPU's graph stream: one
  // non-blocking stream per GPU for all graphs, made once and never destroyed (blocks the caching
  // allocator tags with it stay usable after the graph is gone).
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // The stream the graph is captured on and replayed on: make it current (StreamGuard) for the
  // work around the graph too (warm-up, the inputs' copies, reading the outputs), so that the
  // caching allocator's blocks and the stream order are the graph's.
  const Stream& stream() const { return *stream_; }

  // Captures what `body` queues (the stream is made current for it), then instantiates the graph.
  // Nothing runs. If body throws (a refused call), the capture is ended and discarded and the
  // error rethrown; the graph stays empty.
  void capture(const std::function<void()>& body);
  bool captured() const { return exec_ != nullptr; }

  // Queues one run of the captured work on stream(), and reports its launches to the observers.
  void replay();

  uint64_t id() const { return id_; }
  // The launches captured, in order (their LaunchInfo, graph = id()).
  const std::vector<LaunchInfo>& launches() const { return launches_; }
  // The graph's memory pool in the caching allocator of its device (0 before a capture).
  uint64_t memory_pool() const { return pool_; }

 private:
  const Stream* stream_;
  cudaGraphExec_t exec_ = nullptr;
  int device_ = 0;
  uint64_t pool_ = 0;  // the caching allocator's private pool (0: none yet)
  std::vector<LaunchInfo> launches_;
  uint64_t id_;
};

}  // namespace glass::cuda
