// The host's peak f32 FLOP/s from what its hardware can issue, not from a measurement of our code:
//
//   peak = cores x clock x FLOPs per cycle per core
//   FLOPs per cycle = f32 lanes per vector x FMA units per core x 2 (an FMA is a multiply and an
//   add)
//
// - cores: physical cores this process may run on (hyperthreads share their core's FMA units).
// - clock: the highest of the sources below, because a peak must be an upper bound (a clock that
//   is too low would put measured kernels above the roof):
//     /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq  the most the core may run at, turbo
//                                                            included (absent in most VMs)
//     cpuid leaf 0x16, EBX                                   Intel's "max frequency" (0 in VMs)
//     /proc/cpuinfo "cpu MHz"                                the kernel's idea of the clock now;
//                                                            in a VM the nominal (TSC) clock
//     a chain of dependent register adds (x += x)            one add per cycle on every x86 core,
//                                                            so adds / second is the clock the
//                                                            core runs at now, turbo included;
//                                                            never above the true clock
//   A core's clock moves with the load of the host (turbo: this 2-vCPU VM's chain reads 4.09 GHz
//   quiet and 3.42 GHz while other processes compile), so the measured clock alone would make
//   the peak move with load. The highest chain reading is remembered per CPU model in a small
//   file (remembered_clock_hz: $GLASS_CLOCK_FILE, else $XDG_CACHE_HOME/glass/cpu_clock, else
//   ~/.cache/glass/cpu_clock), and the peak uses the remembered maximum: after one quiet run the
//   peak stays put.
// - lanes: the widest f32 vector the engine's math uses: the ISA our own kernels (the f32 GEMM
//   among them, kernels/cpu/sgemm.cpp) were compiled for, or that of the GEMM kernel OpenBLAS
//   picked for f64 and the emulated cuBLAS (openblas_get_corename: SkylakeX, Cooperlake,
//   SapphireRapids = AVX-512, 16 lanes; Haswell, Zen = AVX2, 8), whichever is wider.
// - FMA units: 2 per core, the most any current x86 core has (Intel since Haswell, Xeon Gold 6000
//   and Platinum for AVX-512, AMD Zen 2-5 for 256 bits). Some cores have fewer (Xeon Silver, Zen 4
//   runs AVX-512 on its 256-bit units): there the peak is an upper bound that is 2x too high, which
//   understates MFU but never shows a kernel above the roof. GLASS_CPU_FMA_UNITS overrides it.
//
// bf16 (the cpu's bf16 GEMMs, kernels/cpu/sgemm_bf16.cpp): on a core with AVX512-BF16, one
// vdpbf16ps does two bf16 products and their adds per f32 lane where an FMA does one, on the same
// units, so the bf16 peak is twice the f32 peak (4 FLOPs per lane per instruction). Without it,
// bf16 GEMMs run as f32 and there is no bf16 peak of its own (bf16_flops() is 0; MFU uses f32's).
#pragma once

#include <string>

namespace glass::kernels::cpu {

struct HardwarePeak {
  int cores = 0;
  double clock_hz = 0;
  std::string clock_source;  // which source gave the clock, and what the others said
  std::string isa;           // "AVX-512", "AVX2", "AVX", "SSE"
  int f32_lanes = 0;
  int fma_units = 0;
  std::string gemm_core;          // OpenBLAS's kernel name ("Cooperlake")
  bool bf16_dot_product = false;  // AVX512-BF16 (vdpbf16ps), found by cpuid

  double flops_per_cycle() const { return 2.0 * f32_lanes * fma_units; }
  double flops() const { return cores * clock_hz * flops_per_cycle(); }
  double bf16_flops() const { return bf16_dot_product ? 2 * flops() : 0.0; }
  // "2 cores x 3.48 GHz x 64 FLOP/cycle (AVX-512: 16 f32 lanes x 2 FMA units x 2) = 445 GFLOP/s;
  // clock: ...; ISA: ..."
  std::string derivation() const;
};

// Works it out once per process (the add chain takes ~10 ms) and returns the same answer after.
const HardwarePeak& hardware_peak();

// The clock in Hz from the dependent-add chain, the best of `runs`; 0 where it cannot be measured
// (not x86-64).
double measure_clock_hz(int runs = 400);

// The highest clock measured on this CPU model: `measured_hz` now, or the most a run on the same
// `cpu_model` has measured before, remembered in the file at `path` (one line per model:
// "<Hz> <model>"; a higher reading replaces the line, written to a new file then renamed, so a
// concurrent reader sees the old or the new file, never half of one). A missing, unreadable or
// unwritable file is not an error: the answer is then the larger of what it held and
// `measured_hz`. Readings above 6.5 GHz (no x86 core runs there) are ignored.
struct RememberedClock {
  double hz = 0;          // max(measured, remembered)
  double remembered = 0;  // what the file held for this model (0: nothing)
};
RememberedClock remembered_clock_hz(const std::string& path, const std::string& cpu_model,
                                    double measured_hz);
// The file above: $GLASS_CLOCK_FILE, else $XDG_CACHE_HOME/glass/cpu_clock, else
// $HOME/.cache/glass/cpu_clock; "" when none of them is set.
std::string clock_memory_path();

}  // namespace glass::kernels::cpu
