// Host launchers of the CUDA kernels (kernels/cuda/*.cu). The same sources build the `cuda` table
// (nvcc) and the `emu` table (host compiler + engine/emu), each in its own inline namespace
// (build.h); backend_table.cu, compiled in both builds, puts them into the dispatch table.
// Each kernel's contract is documented once, on its entry in kernels/kernel_list.inc.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/build.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

// Every kernel of kernels/kernel_list.inc: the `cudnn` entries too, which cudnn_attention.cu
// defines in every build (refusing with one line where cuDNN is not built in).
#define GLASS_KERNEL(kernel, on, params) void kernel params;
#include "kernels/kernel_list.inc"

void check_gemm_args(const GemmArgs& args);  // throws naming what gemm() would refuse
void gemm_cublas(const GemmArgs& args);  // checked arguments, no bias: cuBLAS, never TF32 (gemm.cu)
std::string describe_gemm_args(const GemmArgs& args);  // every argument, for error messages
// One cublasLtMatmul (gemm_lt.cu) for checked arguments: gemm() sends it the GEMMs with a bias and,
// under --tf32, every f32 GEMM; gemm_epilogue() the fused ones.
void gemm_lt(const GemmArgs& args, const GemmEpilogue& epilogue);
int64_t gemm_lt_cached_shapes();  // how many shapes' heuristic results gemm_lt holds

// The workspace cuBLAS and cuBLASLt get for GEMMs on the current stream (gemm.cu): one buffer of
// kGemmWorkspaceBytes per (device, stream handle), allocated on first use and kept. One stream's
// GEMMs run one after another, so its cuBLAS and cuBLASLt calls can share it; two streams never do.
constexpr int64_t kGemmWorkspaceBytes = 32ll << 20;  // what NVIDIA suggests for Hopper
Tensor gemm_workspace(Device device);

// classifier.cu: checks cross-entropy targets on the device (a target outside [0, vocab) that is
// not ignore_index raises a device flag naming `kernel`, row and value) and, when `valid` is not
// null, writes there the number of rows whose target counts. Never waits for the device.
void check_targets(const char* kernel, const Tensor& targets, int64_t vocab, int64_t ignore_index,
                   float* valid);

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
