// The peaks a device's rooflines, kernel summaries and MFU are drawn against.
//
//   cuda      the datasheet row of a known GPU (engine/device_peaks.h: a100, h100, h200), found
//             from the name the driver reports; any other GPU is measured once, on the GPU, with
//             the engine's own kernels (measure_device_peaks)
//   cpu, emu  the host: FLOP/s from its hardware (cores x clock x FLOPs per cycle of the ISA the
//             engine uses, kernels/cpu/hardware_peak.h), bandwidth measured once on `cpu` (the faster
//             copy of 32 MiB and of 256 KiB), and glass's sgemm 512^3 measured as the "attainable" roof beside
//             the peak; emu's kernels are emulated on the host, so they land far below its peaks
//
// Every DevicePeaks says which of these it is in `source`, and every report prints that line.
#pragma once

#include <cstddef>
#include <string>

#include "engine/device.h"
#include "engine/device_peaks.h"

namespace glass::kernels {

DevicePeaks peaks_for(Device d);

// The best of ten timings on `d` (after an untimed run) of an n x n x n f32 GEMM (backend gemm: cuBLAS on a GPU) and
// of a device-to-device copy of `copy_bytes` (counted twice: read and write), synchronised around
// each. What peaks_for uses for a GPU that has no datasheet row.
DevicePeaks measure_device_peaks(Device d, int n = 4096, size_t copy_bytes = size_t{256} << 20);

// Whether the machine was busy while the host's figures were measured. Where Linux reports CPU
// pressure (/proc/pressure/cpu), from `waiting_cores`: how many cores on average had a thread
// waiting for them during the measurements (the stall time's share of the wall-clock time times
// the cores); busy above cpu::kBusyWaitingCores (half a core), the thread pool's own test. Where
// it does not (waiting_cores < 0), from `cpu_share`: the measuring thread's CPU time over the
// wall-clock time, busy below kQuietCpuShare. The share alone misreads a quiet virtual machine:
// the measuring thread also sleeps while the pool's other thread, its core halted by the
// hypervisor, takes hundreds of microseconds to wake (79-89% on a quiet machine, 2026-12-05).
constexpr double kQuietCpuShare = 0.9;
bool measurement_was_busy(double cpu_share, double waiting_cores = -1);
// What the start-up line says about it, with the 1-minute load average for context (a negative
// load_1min or waiting_cores: not known, left out).
std::string measurement_load_note(double cpu_share, double load_1min, int cores,
                                  double waiting_cores = -1);

}  // namespace glass::kernels
