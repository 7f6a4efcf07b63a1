#include "engine/cuda/graph.h"

#include <atomic>
#include <exception>
#include <map>
#include <mutex>

#include "engine/allocator.h"
#include "engine/cuda/check.h"
#include "engine/error.h"

namespace glass::cuda {

namespace {

std::atomic<uint64_t> next_graph_id{1};

const Stream& graph_stream() {
  int device = 0;
  GLASS_CUDA_CHECK(cudaGetDevice(&device), "cuda::Graph");
  static std::mutex mu;
  static auto* streams = new std::map<int, Stream*>;  // never destroyed, like the allocators
  const std::lock_guard lock(mu);
  Stream*& s = (*streams)[device];
  if (s == nullptr) s = new Stream(0);
  return *s;
}

}  // namespace

Graph::Graph() : stream_(&graph_stream()), id_(next_graph_id++) {
  GLASS_CUDA_CHECK(cudaGetDevice(&device_), "cuda::Graph");
}

Graph::~Graph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);  // a destructor must not throw
  // The pool's blocks join the shared cache, tagged with the graph's stream (so other streams
  // take them only after the last replay's work).
  if (pool_ != 0) {
    const StreamGuard guard(*stream_);
    Allocator::for_device({DeviceKind::cuda, device_}).release_pool(pool_);
  }
}

void Graph::capture(const std::function<void()>& body) {
  GLASS_CHECK(exec_ == nullptr, "cuda::Graph {}: already captured", id_);
  const StreamGuard guard(*stream_);
  launches_.clear();
  // Global mode: an unsafe call (cudaMalloc, a synchronous copy) from any thread fails the capture
  // instead of slipping past it.
  GLASS_CUDA_CHECK(cudaStreamBeginCapture(stream_->handle(), cudaStreamCaptureModeGlobal),
                   "cuda::Graph capture");
  cudaGraph_t graph = nullptr;
  Allocator& allocator = Allocator::for_device({DeviceKind::cuda, device_});
  if (pool_ == 0) pool_ = allocator.create_pool();
  try {
    const Allocator::PoolScope in_pool(allocator, pool_);
    const CaptureScope scope(&launches_);
    body();
  } catch (...) {
    cudaStreamEndCapture(stream_->handle(), &graph);  // ends it; the capture is discarded
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    launches_.clear();
    throw;
  }
  GLASS_CUDA_CHECK(cudaStreamEndCapture(stream_->handle(), &graph), "cuda::Graph capture");
  const cudaError_t instantiated = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  GLASS_CUDA_CHECK(instantiated, "cuda::Graph instantiate");
  for (LaunchInfo& info : launches_) info.graph = id_;
}

void Graph::replay() {
  GLASS_CHECK(exec_ != nullptr, "cuda::Graph {}: replay before capture", id_);
  const double at = launch_clock_us();
  GLASS_CUDA_CHECK(cudaGraphLaunch(exec_, stream_->handle()), "cuda::Graph replay");
  report_replayed_launches(launches_, at);
}

}  // namespace glass::cuda
