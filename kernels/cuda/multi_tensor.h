// Multi-tensor launches: one kernel launch works on many tensors (AdamW over every parameter, the
// sum of squares over every gradient), instead of one small launch per tensor.
//
// The tensors' pointers and sizes travel in the kernel's argument struct, by value (kernel
// parameters live in constant memory on a GPU; 4 KB of them hold kMaxTensorsPerLaunch entries
// of several pointers each), so no device-side table has to be copied first. The grid is 2-D:
// blockIdx.y picks the tensor, and the gridDim.x blocks of that row grid-stride over its elements
// (32 consecutive elements per warp step: coalesced). gridDim.x is sized for the largest tensor
// of the launch; blocks of a smaller tensor that find no element exit at once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cuda/kernel_launcher.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

constexpr int kMaxTensorsPerLaunch = 32;

// Calls launch_batch(first, count) for consecutive runs of the items [0, n): at most
// kMaxTensorsPerLaunch items each, and a new run wherever same_launch(i - 1, i) is false (e.g.
// where the dtype changes).
template <class SameLaunch, class LaunchBatch>
void for_each_launch(size_t n, SameLaunch same_launch, LaunchBatch launch_batch) {
  size_t first = 0;
  for (size_t i = 1; i <= n; ++i)
    if (i == n || i - first == kMaxTensorsPerLaunch || !same_launch(i - 1, i)) {
      launch_batch(first, i - first);
      first = i;
    }
}

// Blocks per tensor row of a multi-tensor grid: enough for the largest tensor (each thread taking
// at least `per_thread` elements), at most max_blocks (larger tensors loop), at least 1.
inline unsigned multi_tensor_blocks(int64_t largest, unsigned threads, int64_t per_thread,
                                    unsigned max_blocks) {
  return std::max(1u, std::min(max_blocks, ceil_div(largest, threads * per_thread)));
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
