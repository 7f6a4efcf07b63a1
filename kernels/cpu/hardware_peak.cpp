#include "kernels/cpu/hardware_peak.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cpu/sgemm.h"  // cpu_has_avx512_bf16

#if defined(__x86_64__)
#include <cpuid.h>
#endif

extern "C" char* openblas_get_corename();

namespace glass::kernels::cpu {

namespace {

// The first line of a small sysfs file; "" when it is not there.
std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Physical cores among the CPUs this process may run on: hyperthreads of one core count once.
int physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  std::set<std::pair<std::string, std::string>> cores;
  int logical = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    ++logical;
    const std::string topo = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", c);
    const std::string package = read_line(topo + "physical_package_id");
    const std::string core = read_line(topo + "core_id");
    cores.emplace(package, core.empty() ? std::to_string(c) : core);
  }
  return std::max<int>(1, static_cast<int>(cores.empty() ? logical : cores.size()));
}

// The first CPU's fields in /proc/cpuinfo (its first block, up to the blank line): "key: value"
// pairs, the key's padding and the value's leading blanks dropped.
std::vector<std::pair<std::string, std::string>> first_cpu_info() {
  std::vector<std::pair<std::string, std::string>> fields;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line) && !line.empty();) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t key_end = line.find_last_not_of(" \t", colon == 0 ? 0 : colon - 1);
    const size_t value = line.find_first_not_of(" \t", colon + 1);
    fields.emplace_back(line.substr(0, key_end == std::string::npos ? 0 : key_end + 1),
                        value == std::string::npos ? std::string() : line.substr(value));
  }
  return fields;
}

// One field of first_cpu_info; "" when absent.
std::string cpu_info_field(const std::vector<std::pair<std::string, std::string>>& fields,
                           std::string_view key) {
  for (const auto& [name, value] : fields)
    if (name == key) return value;
  return "";
}

// /proc/cpuinfo's "cpu MHz" of the first CPU, in Hz; 0 when absent.
double proc_cpuinfo_hz() {
  return std::atof(cpu_info_field(first_cpu_info(), "cpu MHz").c_str()) * 1e6;
}

// The CPU model the remembered clock belongs to: /proc/cpuinfo's model name, family, model and
// stepping of the first CPU ("AMD EPYC family 26 model 2 stepping 1"); "unknown" when absent.
std::string cpu_model_identity() {
  const auto fields = first_cpu_info();
  const std::string name = cpu_info_field(fields, "model name");
  if (name.empty()) return "unknown";
  return fmt::format("{} family {} model {} stepping {}", name,
                     cpu_info_field(fields, "cpu family"), cpu_info_field(fields, "model"),
                     cpu_info_field(fields, "stepping"));
}

// cpufreq's maximum for cpu0 (kHz in the file), in Hz; 0 when absent.
double sysfs_max_hz() {
  const std::string khz = read_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  return khz.empty() ? 0 : std::atof(khz.c_str()) * 1e3;
}

// cpuid leaf 0x16 (Intel): EBX is the maximum frequency in MHz; 0 when the leaf is absent or
// zeroed.
double cpuid_max_hz() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 0x16) return 0;
  __cpuid(0x16, a, b, c, d);
  return b * 1e6;
#else
  return 0;
#endif
}

struct Isa {
  std::string name;
  int lanes = 0;
};

// The f32 vector width of the GEMM kernel OpenBLAS chose for this CPU (its DYNAMIC_ARCH core).
Isa isa_of_gemm_core(std::string_view core) {
  for (std::string_view avx512 : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core.find(avx512) != std::string_view::npos) return {"AVX-512", 16};
  for (std::string_view avx2 : {"Haswell", "Zen", "Excavator"})
    if (core.find(avx2) != std::string_view::npos) return {"AVX2", 8};
  if (core.find("Sandybridge") != std::string_view::npos) return {"AVX", 8};
  return {"SSE", 4};
}

// The f32 vector width our own kernels were compiled for (-march=native in the default build).
Isa isa_of_this_build() {
#if defined(__AVX512F__)
  return {"AVX-512", 16};
#elif defined(__AVX2__) && defined(__FMA__)
  return {"AVX2", 8};
#elif defined(__AVX__)
  return {"AVX", 8};
#else
  return {"SSE", 4};
#endif
}

HardwarePeak work_out() {
  HardwarePeak p;
  p.cores = physical_cores();

  const double now = measure_clock_hz();
  const std::string memory = clock_memory_path();
  const RememberedClock clock = remembered_clock_hz(memory, cpu_model_identity(), now);
  const double measured = clock.hz, sysfs = sysfs_max_hz(), leaf = cpuid_max_hz(),
               proc = proc_cpuinfo_hz();
  const std::pair<const char*, double> sources[] = {{"cpufreq cpuinfo_max_freq", sysfs},
                                                    {"cpuid leaf 0x16 max", leaf},
                                                    {"/proc/cpuinfo cpu MHz", proc},
                                                    {"measured (dependent adds)", measured}};
  std::string all;
  for (const auto& [name, hz] : sources) {
    if (!all.empty()) all += ", ";
    all += hz > 0 ? fmt::format("{} {:.2f} GHz", name, hz / 1e9) : fmt::format("{} n/a", name);
    if (hz > p.clock_hz) {
      p.clock_hz = hz;
      p.clock_source = name;
    }
  }
  if (p.clock_hz <= 0) p.clock_hz = 1e9, p.clock_source = "none found: 1 GHz assumed";
  p.clock_source += " (the highest of: " + all + ")";
  // Say where a remembered clock came from, and what this run's chain read.
  if (clock.remembered > now)
    p.clock_source += fmt::format(
        "; the chain read {:.2f} GHz in this run (the host's load lowers the turbo clock), the "
        "highest reading on this CPU model is remembered in {}",
        now / 1e9, memory);

  p.gemm_core = openblas_get_corename();
  const Isa gemm = isa_of_gemm_core(p.gemm_core), ours = isa_of_this_build();
  const Isa& wider = gemm.lanes >= ours.lanes ? gemm : ours;
  p.isa = wider.name;
  p.f32_lanes = wider.lanes;
  // SSE-only and plain-AVX cores have no FMA: a multiply unit and an add unit, 2 FLOPs a cycle
  // per lane as well, so the formula stays lanes x 2 x 2 (counting the pair as "2 units" of 1).
  p.fma_units = 2;
  if (const char* env = std::getenv("GLASS_CPU_FMA_UNITS"))
    p.fma_units = std::max(1, std::atoi(env));
  p.isa += fmt::format(" (OpenBLAS GEMM kernel {}: {}; this build: {})", p.gemm_core, gemm.name,
                       ours.name);
  p.bf16_dot_product = cpu_has_avx512_bf16();
  return p;
}

}  // namespace

double measure_clock_hz(int runs) {
#if defined(__x86_64__)
  // ~15 us a run, many runs: on a shared host a run the scheduler interrupts reads the clock low,
  // and short runs are rarely interrupted. On the AMD EPYC VM of bench/RESULTS.md, 5 runs of 4M
  // adds read 3.21-3.46 GHz from one minute to the next (the printed peak moved with the load);
  // 400 runs of 50k read 3.45-3.52, also with three busy processes on its two cores.
  constexpr long kAdds = 50'000;
  double best = 0;
  for (int r = 0; r < runs; ++r) {
    long x = 1;
    const auto t0 = std::chrono::steady_clock::now();
    // Each add depends on the one before: one per cycle, whatever the core's width. Register +
    // register, not + immediate: Golden Cove's renamer folds chains of immediate adds (measured
    // here: 4x "faster" than the clock), but not x + x.
    for (long i = 0; i < kAdds; i += 8)
      asm volatile(
          "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
          "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0"
          : "+r"(x));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The loop's own counter and branch run beside the chain, on other ports.
    if (s > 0) best = std::max(best, static_cast<double>(kAdds) / s);
  }
  return best;
#else
  (void)runs;
  return 0;
#endif
}

std::string clock_memory_path() {
  if (const char* file = std::getenv("GLASS_CLOCK_FILE")) return file;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/glass/cpu_clock";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/glass/cpu_clock";
  return "";
}

RememberedClock remembered_clock_hz(const std::string& path, const std::string& cpu_model,
                                    double measured_hz) {
  constexpr double kNoX86ClockAbove = 6.5e9;
  const auto plausible = [](double hz) { return hz > 0 && hz < kNoX86ClockAbove; };
  // 1. Read every model's line; keep this model's reading.
  std::vector<std::string> others;
  RememberedClock out;
  if (!path.empty()) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      double hz = 0;
      std::string model;
      if (!(fields >> hz) || !std::getline(fields >> std::ws, model)) continue;  // not ours
      if (model == cpu_model) {
        if (plausible(hz)) out.remembered = std::max(out.remembered, hz);
      } else {
        others.push_back(line);
      }
    }
  }
  out.hz = std::max(out.remembered, plausible(measured_hz) ? measured_hz : 0.0);
  // 2. A higher reading than the file's: rewrite the file, whole, through a rename.
  if (path.empty() || out.hz <= out.remembered) return out;
  std::error_code ec;
  const std::filesystem::path file(path);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
  const std::string temp = fmt::format("{}.{}.tmp", path, static_cast<long>(getpid()));
  {
    std::ofstream tmp(temp, std::ios::trunc);
    for (const std::string& line : others) tmp << line << '\n';
    tmp << fmt::format("{:.0f} {}\n", out.hz, cpu_model);
    if (!tmp.flush()) {
      std::filesystem::remove(temp, ec);
      return out;
    }
  }
  std::filesystem::rename(temp, file, ec);
  if (ec) std::filesystem::remove(temp, ec);
  return out;
}

std::string HardwarePeak::derivation() const {
  return fmt::format(
      "{} cores x {:.2f} GHz x {:.0f} FLOP/cycle ({} f32 lanes x {} FMA units x 2) = {:.1f} "
      "GFLOP/s; "
      "clock: {}; ISA: {}",
      cores, clock_hz / 1e9, flops_per_cycle(), f32_lanes, fma_units, flops() / 1e9, clock_source,
      isa);
}

const HardwarePeak& hardware_peak() {
  static const HardwarePeak peak = work_out();
  return peak;
}

}  // namespace glass::kernels::cpu
