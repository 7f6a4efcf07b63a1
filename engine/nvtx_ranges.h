// NvtxRanges: NVTX ranges for Nsight Systems, built from the launch gateway (cuda builds only).
//
// While subscribed, every launch is wrapped in a range named "op/kernel", inside a range for its
// phase: when a launch's phase differs from the last one on its thread, the phase range is closed
// and a new one opened. Nsight then shows phase > op/kernel on each host thread, the structure the
// Chrome trace shows. NVTX v3 is header-only: with no tool attached a range costs a few ns.
#pragma once

#if GLASS_HAS_CUDA

#include "engine/launch.h"

namespace glass {

class NvtxRanges : public LaunchObserver {
 public:
  // Closes the phase range left open on the calling thread (call it on the thread that launched).
  void close_phase();

  void on_launch_begin(const LaunchInfo& info) override;
  void on_launch_end(const LaunchRecord& r) override;
};

}  // namespace glass

#endif  // GLASS_HAS_CUDA
