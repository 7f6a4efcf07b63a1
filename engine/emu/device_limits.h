// The limits of the GPU the emulator stands in for: an NVIDIA H200 (SXM, compute capability 9.0).
//
// One table, read by everything that must fail where the GPU fails: the emulator's launch checks
// (threads per block, grid dimensions, shared memory per block), the emulated CUDA runtime's
// cudaGetDeviceProperties / cudaDeviceGetAttribute / cudaFuncSetAttribute, and the occupancy
// reports. Sources: the CUDA Programming Guide's table of technical specifications per compute
// capability (9.0) and NVIDIA's H200 datasheet (141 GB HBM3e, 4.8 TB/s, 132 SMs on the SXM part).
#pragma once

#include <cstddef>
#include <cstdint>

namespace glass::emu {

struct DeviceLimits {
  const char* name;
  int compute_major, compute_minor;
  int multiprocessors;
  int warp_size;
  int max_threads_per_block;
  int max_block_dim_x, max_block_dim_y, max_block_dim_z;
  int64_t max_grid_dim_x;
  int max_grid_dim_y, max_grid_dim_z;
  // Shared memory: a block gets `shared_per_block` bytes (static + dynamic) unless the kernel
  // opts in with cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize), up to
  // `shared_per_block_optin`; a multiprocessor has `shared_per_multiprocessor` in all.
  size_t shared_per_block, shared_per_block_optin, shared_per_multiprocessor;
  int registers_per_multiprocessor, registers_per_block, max_registers_per_thread;
  int max_threads_per_multiprocessor, max_blocks_per_multiprocessor;
  size_t global_memory_bytes;
  size_t l2_cache_bytes;
  int clock_khz;         // boost clock of the SMs
  int memory_clock_khz;  // HBM3e
  int memory_bus_bits;
};

inline constexpr DeviceLimits kH200{
    .name = "NVIDIA H200 (emulated)",
    .compute_major = 9,
    .compute_minor = 0,
    .multiprocessors = 132,
    .warp_size = 32,
    .max_threads_per_block = 1024,
    .max_block_dim_x = 1024,
    .max_block_dim_y = 1024,
    .max_block_dim_z = 64,
    .max_grid_dim_x = 0x7fffffff,
    .max_grid_dim_y = 65535,
    .max_grid_dim_z = 65535,
    .shared_per_block = 48 * 1024,
    .shared_per_block_optin = 227 * 1024,
    .shared_per_multiprocessor = 228 * 1024,
    .registers_per_multiprocessor = 64 * 1024,
    .registers_per_block = 64 * 1024,
    .max_registers_per_thread = 255,
    .max_threads_per_multiprocessor = 2048,
    .max_blocks_per_multiprocessor = 32,
    .global_memory_bytes = size_t{141} * 1000 * 1000 * 1000,
    .l2_cache_bytes = size_t{50} * 1024 * 1024,
    .clock_khz = 1980000,
    .memory_clock_khz = 2619000,
    .memory_bus_bits = 6144,
};

}  // namespace glass::emu
