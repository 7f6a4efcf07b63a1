// The `emu` ladder table: the rungs' launchers, compiled for the emulator (this file is built with
// the .cu sources into glass_kernels_emu). The production rungs are the production launchers.
// kernels::ladder::ladder_table(Device) in kernels/ladder.cpp hands it out for DeviceKind::emu.
#include "kernels/cuda/ladder/ladder_kernels.h"
#include "kernels/ladder.h"

namespace glass::kernels::ladder {

const LadderTable& emu_ladder_table() {
  static const LadderTable table{
      .softmax_forward = {cuda::softmax_forward_naive, cuda::softmax_forward_coalesced,
                          cuda::softmax_forward, cuda::softmax_forward_float4},
      .layernorm_forward = {cuda::layernorm_forward_naive, cuda::layernorm_forward_coalesced,
                            cuda::layernorm_forward, cuda::layernorm_forward_float4},
      .gemm = {cuda::matmul_naive, cuda::matmul_smem_tiled, cuda::matmul_register_tiled,
               cuda::gemm},
  };
  return table;
}

}  // namespace glass::kernels::ladder
