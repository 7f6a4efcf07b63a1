// How much memory a device has free now, as its own runtime reports it: what the training
// pre-flight (train/preflight.h) compares a planned step with, and what an out-of-memory error
// (engine/out_of_memory.h) quotes.
//   cuda: cudaMemGetInfo on the current GPU (on the emulated CUDA runtime: GLASS_EMU_GPU_MEMORY's
//         budget of that emulated GPU, engine/emu/gpu_memory.h);
//   emu:  the emu device's GLASS_EMU_GPU_MEMORY budget, less what the emulator has handed out;
//   cpu:  MemAvailable of /proc/meminfo (what the kernel can give without swapping), of MemTotal;
//   meta: none (nothing is stored: a plan never runs out).
// The allocator's cache is not free: a cached block is device memory the process holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/device.h"

namespace glass {

struct DeviceMemory {
  int64_t free_bytes = 0, total_bytes = 0;
  const char* source = "";  // where the figures come from ("cudaMemGetInfo", "MemAvailable", ...)
};

// The device's free and total memory now; nullopt on meta, or where the figure cannot be read
// (a cpu without /proc/meminfo).
std::optional<DeviceMemory> device_memory(Device device);

// "1.50 GiB", "512.0 MiB", "12.0 KiB", "100 B": a byte count for people.
std::string format_bytes(double bytes);

}  // namespace glass
