// The peaks a device's rooflines, kernel summaries and MFU are drawn against.
//
//   cuda      the datasheet row of a known GPU (engine/device_peaks.h: a100, h100, h200), found
//             from the name the driver reports; any other GPU is measured once, on the GPU, with
//             the engine's own kernels (measure_device_peaks)
//   cpu, emu  the host: FLOP/s from its hardware (cores x clock x FLOPs per cycle of the ISA the
//             engine uses, kernels/cpu/hardware_peak.h), bandwidth measured once on `cpu` (a
//             32 MiB copy), and glass's sgemm 512^3 measured as the "attainable" roof beside
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

// The best of three timings on `d` of an n x n x n f32 GEMM (backend gemm: cuBLAS on a GPU) and
// of a device-to-device copy of `copy_bytes` (counted twice: read and write), synchronised around
// each. What peaks_for uses for a GPU that has no datasheet row.
DevicePeaks measure_device_peaks(Device d, int n = 4096, size_t copy_bytes = size_t{256} << 20);

// Whether the machine was busy while the host's figures were measured, from `cpu_share`: the CPU
// time the measuring thread got over the wall-clock time of the measurements. That thread never
// waits for anything but its own work (and, briefly, the pool's other thread), so on a quiet
// machine it runs ~100% of the time; below kQuietCpuShare other processes held its core for a
// tenth of the time or more, and the measured bandwidth and GEMM rate read low by about as much.
constexpr double kQuietCpuShare = 0.9;
bool measurement_was_busy(double cpu_share);
// What the start-up line says about it, with the 1-minute load average for context (a negative
// load_1min: not known, left out).
std::string measurement_load_note(double cpu_share, double load_1min, int cores);

}  // namespace glass::kernels
