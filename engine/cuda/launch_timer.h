// time_on_gpu: when a launch ran on the GPU, for the launch gateway while an observer records.
//
// A kernel launch returns long before the kernel has run, so the host clock around it measures
// only the launching. While someone records (engine/launch.cpp: an observer is subscribed), the
// gateway brackets every `cuda` launch with two timing events on the stream the work goes to and
// waits for the second: the kernel's duration is the GPU's own (cudaEventElapsedTime, ~0.5 µs
// resolution). Start and end are placed on the host timeline of the other launches through a
// reference event, recorded once per GPU and thread and waited for, whose host time is known.
//
// Waiting after each launch serialises host and GPU while recording: the step gets slower (the
// profiler overhead profile_op reports), and kernels on two streams no longer overlap, but each
// kernel's own time is what the GPU spent on it. Without observers nothing of this runs.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace glass::cuda {

struct GpuSpan {
  double start_us = 0, end_us = 0;  // on the clock of `host_now_us`
};

// Runs `issue` (which queues work onto `stream` of the current GPU) between two timing events
// and returns when that work ran. `host_now_us` is the clock the result is expressed in.
GpuSpan time_on_gpu(cudaStream_t stream, const std::function<void()>& issue,
                    double (*host_now_us)());

}  // namespace glass::cuda
