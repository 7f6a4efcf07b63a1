// Device memory on emu: host memory handed out behind device-style pointers.
//
// Fresh allocations are filled with 0xFF bytes (NaN as any float type, -1 as an integer), so a
// kernel that reads memory nobody wrote produces visibly wrong results. With
// Settings::check_memory (GLASS_EMU_CHECK=1) each allocation also gets red zones before and
// after it; every launch and every device_free checks them and throws EmuError naming the kernel
// and the allocation when something wrote there. A write that lands beyond a red zone is not
// seen (AddressSanitizer sees it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/emu/error.h"
#include "engine/emu/gpu_memory.h"

namespace glass::emu {

// What device_malloc throws when the memory is full: the caller may give memory back and retry
// (any other EmuError, e.g. a bad GLASS_EMU_GPU_MEMORY, is not an out of memory).
class OutOfDeviceMemory : public EmuError {
 public:
  using EmuError::EmuError;
};

// Like cudaMalloc: the pointer is aligned to 256 bytes. `memory` is the budget it draws from
// (gpu_memory.h: the `emu` device's, or an emulated GPU's): throws EmuError when the allocation,
// rounded up to 256 bytes, does not fit in what is left of it, or the host has no memory
// (OutOfDeviceMemory).
void* device_malloc(size_t bytes, int memory = kEmuDeviceMemory);
// Like cudaFree; nullptr is ignored. Throws EmuError for a pointer device_malloc did not return,
// or, when it has red zones, if they were written.
void device_free(void* p);

// Checks the red zones of every live allocation that has them; throws EmuError naming `kernel`
// (and restores the zones, so that one bad write is reported once). Called after every launch
// in checking mode.
void check_red_zones(const char* kernel);

namespace detail {

// A live allocation, as the launch checks (launch_checks.h) see it.
struct AllocationView {
  std::byte* base;  // the user's first byte
  size_t bytes;
  uint64_t serial;  // #n in reports: the n-th allocation of the process
};

// The live allocation holding p, if any.
std::optional<AllocationView> find_allocation(const void* p);
std::vector<AllocationView> live_allocations();

// With Settings::init_check (GLASS_EMU_INITCHECK=1) fresh allocations are filled with this
// 4-byte word instead of 0xFF bytes: NaN as f32 and as either half of it in bf16/f16, and an
// integer no program writes by accident, so that a word still holding it was never written.
constexpr uint32_t kNeverWrittenWord = 0x7FA5FFFFu;

}  // namespace detail

}  // namespace glass::emu
