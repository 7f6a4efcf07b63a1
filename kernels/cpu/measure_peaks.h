// The host's peaks, measured once: what the `cpu` (and `emu`) rooflines are drawn against.
//
// Compute: the best of a few runs of a 512^3 sgemm through OpenBLAS (the fastest f32 math this
// build has). Memory: the best of a few copies of a 32 MiB buffer, counting the read and the write.
// Measured with the threads set by kernels::cpu::set_threads, on the first call only.
#pragma once

#include "engine/device.h"
#include "engine/device_peaks.h"

namespace glass::kernels::cpu {

const DevicePeaks& measured_host_peaks();

// The peaks a device's rooflines are drawn against. `cpu` and `emu` both run on the host, so both
// get its measured peaks (emu's kernels are emulated, and land far below them).
DevicePeaks peaks_for(Device d);

}  // namespace glass::kernels::cpu
