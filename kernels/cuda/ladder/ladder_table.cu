// The ladder tables: the rungs' launchers of this build (kernels/cuda/build.h). Compiled by the
// host compiler it defines emu_ladder_table(), and cuda_ladder_table() too on the emulated CUDA
// runtime; compiled by nvcc cuda_ladder_table(): as backend_table.cu does for the kernel tables.
// The production rungs are the production launchers. kernels::ladder::ladder_table(Device) in
// kernels/ladder.cpp hands them out.
#include "kernels/cuda/ladder/ladder_kernels.h"
#include "kernels/ladder.h"

namespace glass::kernels::ladder {

namespace {

// One table per build: the entries are launchers, which take their device's path at each launch
// (kernel_launcher.h), so emu and cuda on the emulated runtime share it.
const LadderTable& this_builds_ladder() {
  namespace k = cuda::GLASS_CUDA_BUILD;
  static const LadderTable table{
      .softmax_forward = {k::softmax_forward_naive, k::softmax_forward_coalesced,
                          k::softmax_forward, k::softmax_forward_float4},
      .layernorm_forward = {k::layernorm_forward_naive, k::layernorm_forward_coalesced,
                            k::layernorm_forward, k::layernorm_forward_float4},
      .rmsnorm_forward = {k::rmsnorm_forward_naive, k::rmsnorm_forward},
      .gemm = {k::matmul_naive, k::matmul_smem_tiled, k::matmul_register_tiled, k::gemm,
               k::matmul_tensor_core},
      .attention_forward = {k::attention_forward_naive, k::attention_forward_row_fused,
                            k::attention_forward_tiled, k::flash_attention_forward,
                            k::flash_attention_forward_mma},
  };
  return table;
}

}  // namespace

#if !defined(__CUDACC__)
const LadderTable& emu_ladder_table() { return this_builds_ladder(); }
#endif
#if defined(GLASS_CUDA_BUILD_SERVES_CUDA)
const LadderTable& cuda_ladder_table() { return this_builds_ladder(); }
#endif

}  // namespace glass::kernels::ladder
