// Settings of the emulator. Each starts from an environment variable (read once, on first use)
// and can be replaced from code between launches; a launch uses the values current at its start.
//
//   GLASS_EMU_THREADS=n          OS threads that run blocks, the launching thread included
//                                (default: std::thread::hardware_concurrency()).
//   GLASS_EMU_STACK_KB=n         stack of each fiber (default 256 KiB, 1 MiB under ASan).
//   GLASS_EMU_SHUFFLE_SEED=n     start the threads of a block, and resume them after every
//                                barrier, in an order shuffled by this seed (default: natural
//                                order), so that a missing barrier shows up as a wrong result.
//   GLASS_EMU_CHECK=1            red zones around device allocations, checked after every launch.
//   GLASS_EMU_RACECHECK=1        run every launch under several thread orders and report the
//                                block and first address whose result depends on the order.
//   GLASS_EMU_INITCHECK=1        report kernels whose results depend on device memory never
//                                written since it was allocated.
//   GLASS_EMU_BREAK=B/T[@kernel] call glass_emu_thread_hook() when CUDA thread T of block B
//                                (of that kernel, or any) starts; B and T are x[,y[,z]].
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace glass::emu {

// One CUDA thread to stop at in a debugger (see debug_hook.h).
struct BreakTarget {
  uint3 block{0, 0, 0};
  uint3 thread{0, 0, 0};
  std::string kernel;  // empty: any kernel
};

struct Settings {
  unsigned worker_threads = 1;
  size_t fiber_stack_bytes = 256 * 1024;
  std::optional<uint64_t> shuffle_seed;
  bool check_memory = false;
  bool race_check = false;
  bool init_check = false;
  std::optional<BreakTarget> break_at;

  // The defaults overridden by the GLASS_EMU_* variables above; throws EmuError naming the
  // variable when one cannot be parsed.
  static Settings from_environment();
};

// The settings in force (from_environment() until set_settings is called).
Settings settings();
// Replaces all settings; takes effect at the next launch or allocation.
void set_settings(const Settings& s);

}  // namespace glass::emu
