// The memory of an emulated GPU, limited like a real one's.
//
//   GLASS_EMU_GPU_MEMORY=<size>   each emulated GPU's memory: a byte count ("1073741824") or a
//                                 number with a unit, decimal (kB, MB, GB, TB: powers of 1000) or
//                                 binary (KiB, MiB, GiB, TiB: powers of 1024), e.g. 2GiB, 512MiB,
//                                 1.5GB. Default: the H200's 141 GB (device_limits.h), the figure
//                                 cudaGetDeviceProperties reports as totalGlobalMem.
//
// The limit is one budget per memory: each emulated GPU of the emulated CUDA runtime (cudaMalloc
// fails with cudaErrorMemoryAllocation past it, cudaMemGetInfo reports free and total against it)
// and the `emu` device (its allocator gets nullptr, as on a GPU out of memory). What counts is
// what the emulator hands out (engine/emu/memory.h: each allocation rounded up to 256 bytes, as
// cudaMalloc's granularity), so a program that fits an H100's 80 GB here fits one there, up to
// what a GPU holds beside (the CUDA context, cuBLAS's and NCCL's own buffers).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace glass::emu {

// `text` as a byte count (the units above; surrounding spaces ignored, a unit needs a number
// before it, a fraction needs a unit, the result must be at least one byte), or nullopt.
std::optional<size_t> parse_byte_size(std::string_view text);

// Each emulated GPU's memory in bytes: GLASS_EMU_GPU_MEMORY (read once), else the H200's.
// Throws EmuError naming the variable and its value when the value is not a size.
size_t gpu_memory_bytes();

// The memory that allocations draw from: the `emu` device's, or emulated GPU i's (i >= 0).
inline constexpr int kEmuDeviceMemory = -1;

struct GpuMemoryInfo {
  size_t free = 0, total = 0;
};
// Free and total bytes of `memory` (kEmuDeviceMemory or a GPU index), as cudaMemGetInfo.
GpuMemoryInfo gpu_memory_info(int memory);

}  // namespace glass::emu
