// Debug switches of the launch gateway: synchronous mode, NaN/Inf checking, break-on-launch.
//
//   GLASS_SYNC=1             after every launch, wait for the device and check for an error; an
//                            error is rethrown naming the kernel, the autograd op, the node id and
//                            the forward call site that created the node. On `cpu` and `emu`
//                            launches are synchronous already, so this adds the context; on `cuda`
//                            it is cudaDeviceSynchronize + cudaGetLastError after each kernel.
//   GLASS_CHECK_NAN=1        anomaly mode: every op's forward output and every node's input
//                            gradients are scanned for NaN/Inf (autograd/anomaly.h); the first
//                            node that produced one stops the run with a glass::Error naming it
//                            and its creation site.
//   GLASS_BREAK_ON=a[,b...]  call glass_break_here(&info) right before every launch whose kernel
//                            name or op name is in the list: `break glass_break_here` in gdb stops
//                            there with the LaunchInfo at hand (`print *info`).
//
// Each variable is read once, on first use; tests and programs replace them with
// set_debug_settings(). With every switch off the gateway pays one relaxed atomic load per launch.
// The emulator's own per-thread hook (GLASS_EMU_BREAK, glass_emu_thread_hook in
// engine/emu/debug_hook.h) stops at one CUDA thread inside a launch; GLASS_BREAK_ON stops before
// the launch. Both match kernels by the same name, LaunchInfo::kernel.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/launch.h"

// Called before every launch that GLASS_BREAK_ON names. Never inlined and never optimised away:
// a breakpoint on it always has a place to stop.
extern "C" void glass_break_here(const glass::LaunchInfo* info);

namespace glass {

struct DebugSettings {
  bool sync = false;
  bool check_nan = false;
  std::vector<std::string> break_on{};  // kernel or op names

  bool any() const { return sync || check_nan || !break_on.empty(); }
  // The defaults overridden by GLASS_SYNC, GLASS_CHECK_NAN and GLASS_BREAK_ON; throws glass::Error
  // naming the variable when one cannot be parsed.
  static DebugSettings from_environment();
};

// The settings in force (from_environment() until set_debug_settings is called).
DebugSettings debug_settings();
// Replaces all debug switches, for every thread, from the next launch on.
void set_debug_settings(const DebugSettings& s);

// How many times glass_break_here has been called in this process.
uint64_t break_hits();

namespace detail {
// The switches as bits, read on every launch and every op: 0 until the environment has been read.
enum DebugBits : uint8_t { kDebugLoaded = 1, kDebugAny = 2, kDebugCheckNan = 4 };
extern std::atomic<uint8_t> debug_bits;
uint8_t load_debug_bits();  // reads the environment if nobody has yet; returns the bits
}  // namespace detail

inline bool check_nan_enabled() {
  uint8_t bits = detail::debug_bits.load(std::memory_order_relaxed);
  if (bits == 0) bits = detail::load_debug_bits();
  return bits & detail::kDebugCheckNan;
}

}  // namespace glass
