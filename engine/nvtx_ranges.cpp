#include "engine/nvtx_ranges.h"

#if GLASS_HAS_CUDA

#include <nvtx3/nvToolsExt.h>

#include <string>

namespace glass {

namespace {

// The phase whose range is open on this thread; Phase::other with none open.
struct OpenPhase {
  bool open = false;
  Phase phase = Phase::other;
};
thread_local OpenPhase open_phase;

}  // namespace

void NvtxRanges::close_phase() {
  if (!open_phase.open) return;
  nvtxRangePop();
  open_phase.open = false;
}

void NvtxRanges::on_launch_begin(const LaunchInfo& info) {
  if (!open_phase.open || open_phase.phase != info.phase) {
    close_phase();
    nvtxRangePushA(phase_name(info.phase));
    open_phase = {true, info.phase};
  }
  const std::string name = std::string(info.op) + "/" + info.kernel;
  nvtxRangePushA(name.c_str());
}

void NvtxRanges::on_launch_end(const LaunchRecord&) { nvtxRangePop(); }

}  // namespace glass

#endif  // GLASS_HAS_CUDA
