// Numbers that tell the truth without a GPU: what ptxas allotted each kernel of the cuda build, and
// the occupancy each launch configuration gets on an H200.
//
// The build compiles kernels/cuda with nvcc --resource-usage and records ptxas's report per kernel
// and architecture in kernel_resources.json in the build directory
// (kernels/cuda/nvcc/ptxas_resources.py; $GLASS_KERNEL_RESOURCES points elsewhere). Occupancy is
// then arithmetic on the H200's limits (engine/emu/device_limits.h), as the CUDA occupancy
// calculator does it: an SM runs as many blocks as the scarcest of its resources allows.
//
//   blocks/SM = min( max blocks per SM                                         (32)
//                    max warps per SM / warps per block                        (64 / W)
//                    registers per SM / registers per block                    (65536 / ...)
//                    shared memory per SM / shared memory per block )          (228 KiB / ...)
//   registers per block = W * roundup(registers per thread * 32, 256)   (allocated per warp)
//   shared per block    = roundup(static + dynamic + 1 KiB reserved by the system, 128)
//   occupancy           = blocks/SM * W / max warps per SM
//
// A launch is matched with its __global__ function by the naming convention of kernels/cuda: a
// launch named N runs N_kernel (layernorm_forward -> layernorm_forward_kernel<T>), or a function
// named after the launch itself; a launch of a generic kernel names it in LaunchInfo::function
// (gelu_forward runs map1_kernel<T, GeluForward>: every instantiation of map1_kernel is counted).
// cuBLAS and cuDNN calls run NVIDIA's kernels, which this build does not compile: they are marked
// as library calls, without occupancy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/emu/device_limits.h"
#include "engine/trace.h"

namespace glass {

// One __global__ function of the cuda build, for one architecture, as ptxas reported it.
struct KernelResources {
  std::string function;       // "layernorm_forward_kernel"
  std::string template_args;  // "float", "__nv_bfloat16", "" when not a template
  std::string source;         // "kernels/cuda/layernorm.cu"
  std::string arch;           // "sm_90"
  bool production = true;     // false for the kernel ladders' rungs (kernels/cuda/ladder)
  int registers = 0, barriers = 0;
  int64_t static_shared_bytes = 0, local_bytes = 0, stack_bytes = 0;
  int64_t spill_store_bytes = 0, spill_load_bytes = 0;
  // mma.sync / wgmma.mma_async instructions in its PTX (a static count, the functions it calls
  // included): > 0 for the Tensor Core kernels, 0 for the kernels that run on the CUDA cores
  int mma_instructions = 0;
  bool spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
};

struct KernelResourceReport {
  std::string path;
  std::vector<KernelResources> kernels;
  std::string missing;  // why there is no report (empty when `kernels` was read)
};

// Reads a report; a missing file gives an empty report saying so, a malformed one throws naming
// the file and the problem.
KernelResourceReport read_kernel_resources(const std::string& path);
// This build's report (read once).
const KernelResourceReport& kernel_resource_report();

// The entries (one per template instantiation) of the function a launch named `launch` runs, for
// `arch`.
std::vector<const KernelResources*> kernels_for_launch(const KernelResourceReport& report,
                                                       std::string_view launch,
                                                       std::string_view arch = "sm_90");

struct Occupancy {
  int warps_per_block = 0;
  int blocks_per_sm = 0;     // 0: the block does not fit at all
  double fraction = 0;       // resident warps / max warps per SM
  const char* limiter = "";  // "blocks", "warps", "registers" or "shared memory"
};

// The theoretical occupancy of blocks of `threads` threads, each thread using `registers`
// registers and each block `shared_bytes` of shared memory (static + dynamic), on `limits`.
Occupancy theoretical_occupancy(int threads, int registers, int64_t shared_bytes,
                                const emu::DeviceLimits& limits = emu::kH200);

// One launch configuration seen in a trace: a kernel with one block size and dynamic shared
// memory, and what it gets on an H200 with the registers and static shared memory ptxas gave its
// function (the largest over its instantiations: the worst case).
struct LaunchOccupancy {
  std::string kernel;
  int threads = 0;
  int64_t dynamic_shared_bytes = 0;
  int64_t calls = 0;
  int instantiations = 0;  // 0: no ptxas entry for this launch
  // "cuBLAS" or "cuDNN" for a library call (its kernels are NVIDIA's, compiled outside this
  // build, so ptxas reported nothing for them); "" for a kernel of kernels/cuda.
  std::string library;
  int registers = 0;
  int64_t static_shared_bytes = 0;
  bool spills = false;
  int mma_instructions = 0;  // the most of any instantiation: > 0 for a Tensor Core kernel
  Occupancy occupancy;
};

// The library a launch named `kernel` calls ("cuBLAS" for cublas*, "cuDNN" for cudnn*), or "".
const char* library_of(std::string_view kernel);

// The launch configurations of the launches on emu or cuda (cpu launches have none), in order of
// first appearance.
std::vector<LaunchOccupancy> launch_occupancy(const std::vector<TracedLaunch>& launches,
                                              const KernelResourceReport& report);
// A fixed-width table of them, with a header naming the report (or saying why there is none).
std::string occupancy_table(const std::vector<LaunchOccupancy>& rows,
                            const KernelResourceReport& report);

}  // namespace glass
