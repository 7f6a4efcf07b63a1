#include "engine/cuda/check.h"

#include <cstdlib>
#include <cstring>

#include "engine/error.h"

namespace glass::cuda {

namespace {

std::string describe(cudaError_t err) {
  return fmt::format("{} ({})", cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace

void check(cudaError_t err, const char* call, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // resets the slot for non-sticky errors; sticky ones stay anyway
  fail("{}: {} failed: {}", what, call, describe(err));
}

void check_launch(cudaError_t err, const LaunchInfo& info, cudaStream_t stream) {
  // Not while capturing a graph: the kernel has not run, and a synchronisation would invalidate
  // the capture (a replay's faults surface at the next synchronisation instead).
  if (err == cudaSuccess && sync_mode() && !capturing_graph()) err = cudaStreamSynchronize(stream);
  if (err == cudaSuccess) return;
  cudaGetLastError();
  const LaunchContext& ctx = current_launch_context();  // what glass::launch filled in
  fail(
      "CUDA launch of kernel '{}' (op '{}', node {}, grid [{}, {}, {}], block [{}, {}, {}], {} B "
      "shared) on {} failed: {}",
      info.kernel, ctx.op, ctx.node_id, info.grid.x, info.grid.y, info.grid.z, info.block.x,
      info.block.y, info.block.z, info.shared_bytes, info.device.str(), describe(err));
}

bool sync_mode() {
  static const bool on = [] {
    const char* v = std::getenv("GLASS_CUDA_SYNC");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

}  // namespace glass::cuda
