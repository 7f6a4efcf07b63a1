// Shared memory per block on emu, limited as on the GPU it stands in for (device_limits.h).
//
// A block may use `shared_per_block` bytes (48 KB), static __shared__ and dynamic together, unless
// its kernel opted in, as cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
// bytes) does on the GPU: then up to `bytes` of dynamic shared memory, as long as static + dynamic
// stay within `shared_per_block_optin` (227 KB). Opting in beyond that is itself an error.
// Launches over the limit throw EmuError naming the kernel, the bytes asked and the limit.
//
// The opt-in is recorded per __global__ function (the pointer launch_kernel receives), which is
// what the emulated cudaFuncSetAttribute passes too; kernels/cuda/shared_memory.h is the one
// helper kernel launchers call, under nvcc and under emu alike.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace glass::emu {

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) on emu.
// Throws EmuError naming `name` when bytes exceeds the device's opt-in limit.
void set_max_dynamic_shared_bytes(const void* kernel, const char* name, size_t bytes);

// The kernel's cudaFuncAttributeMaxDynamicSharedMemorySize: what it opted into, or, without an
// opt-in, the default per-block limit less its static shared bytes (as far as launches have
// measured them).
size_t max_dynamic_shared_bytes(const void* kernel);

namespace detail {

// The static __shared__ variables (indices into static_shared_variables()) that launches of this
// kernel have written so far, sorted; none before its first launch. `kernel` may be null (a
// lambda body): then the name is the key.
std::optional<std::vector<size_t>> known_static_shared(const void* kernel, const char* name);
void record_static_shared(const void* kernel, const char* name, const std::vector<size_t>& written);

// Throws EmuError when a block of this kernel with `static_bytes` of static and `dynamic_bytes`
// of dynamic shared memory would not launch on the GPU. `static_detail` names the static
// variables in the message (may be empty).
void check_shared_memory(const void* kernel, const char* name, size_t static_bytes,
                         size_t dynamic_bytes, const std::string& static_detail);

}  // namespace detail
}  // namespace glass::emu
