#include "engine/cuda/launch_timer.h"

#include <map>

#include "engine/cuda/check.h"
#include "engine/cuda/stream.h"

namespace glass::cuda {

namespace {

// Per GPU and host thread (events belong to the GPU that was current when they were made, and
// one thread's pair is never in use twice at once): a reference event with its host time, and the
// start/end pair every timed launch reuses (it has been waited for before the next launch).
struct Timing {
  Event reference{true}, start{true}, end{true};
  double reference_us = 0;
  bool anchored = false;
};

// cudaEventElapsedTime returns float ms: 6e-5 ms (0.06 µs) apart at 1 s from the reference, but
// 0.25 ms apart after an hour. The reference is renewed when it is more than a second old.
constexpr float kMaxReferenceAgeMs = 1000;

Timing& timing_for_current_gpu(double (*host_now_us)()) {
  thread_local std::map<int, Timing> per_gpu;
  int gpu = 0;
  GLASS_CUDA_CHECK(cudaGetDevice(&gpu), "time_on_gpu");
  Timing& t = per_gpu[gpu];
  if (!t.anchored) {
    // Recorded on an idle GPU and waited for at once: it completes within a few µs of the host
    // time read right after, which anchors the GPU's clock to the host's.
    GLASS_CUDA_CHECK(cudaDeviceSynchronize(), "time_on_gpu: reference event");
    t.reference.record(nullptr);
    t.reference.synchronize();
    t.reference_us = host_now_us();
    t.anchored = true;
  }
  return t;
}

}  // namespace

GpuSpan time_on_gpu(cudaStream_t stream, const std::function<void()>& issue,
                    double (*host_now_us)()) {
  Timing& t = timing_for_current_gpu(host_now_us);
  t.start.record(stream);
  issue();
  t.end.record(stream);
  t.end.synchronize();
  // The start relative to the reference, the duration from the pair itself (ms to µs).
  const float since_reference_ms = t.start.elapsed_ms_since(t.reference);
  GpuSpan span;
  span.start_us = t.reference_us + 1e3 * since_reference_ms;
  span.end_us = span.start_us + 1e3 * t.end.elapsed_ms_since(t.start);
  if (since_reference_ms > kMaxReferenceAgeMs) t.anchored = false;
  return span;
}

}  // namespace glass::cuda
