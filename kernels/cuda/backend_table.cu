// The kernel tables of kernels/cuda: one source, compiled in both builds (build.h). Compiled for
// the emulator it defines emu_backend(), the `emu` table; compiled by nvcc it defines
// cuda_backend(), the `cuda` table. kernels::backend(Device) in kernels/cpu/backend_cpu.cpp hands
// them out. The entries are the host launchers of this build's production kernels: what you read
// in softmax.cu is what runs. Only while GLASS_KERNEL_VARIANT (or a test) selects a kernel-ladder
// rung other than production (kernels/ladder.h) does the table hand out a copy whose five ladder
// entries run the selected rungs.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/ladder.h"

namespace glass::kernels {

namespace {

Backend cuda_kernel_table(const char* name) {
  namespace k = cuda::GLASS_CUDA_BUILD;
  return Backend {
    .name = name, .fill = k::fill, .copy = k::copy, .cast = k::cast, .fill_normal = k::fill_normal,
    .fill_uniform = k::fill_uniform, .binary = k::binary, .affine = k::affine,
    .pow_scalar = k::pow_scalar, .gelu_forward = k::gelu_forward, .gelu_backward = k::gelu_backward,
    .dropout_forward = k::dropout_forward, .dropout_backward = k::dropout_backward,
    .sum_dim = k::sum_dim, .sum_squares = k::sum_squares, .clip_scale = k::clip_scale,
    .step_status = k::step_status, .gemm = k::gemm, .gemm_epilogue = k::gemm_epilogue,
    .softmax_forward = k::softmax_forward, .softmax_backward = k::softmax_backward,
    .log_softmax_forward = k::log_softmax_forward, .log_softmax_backward = k::log_softmax_backward,
    .cross_entropy_forward = k::cross_entropy_forward,
    .cross_entropy_backward = k::cross_entropy_backward, .fused_classifier = k::fused_classifier,
    .layernorm_forward = k::layernorm_forward, .layernorm_backward = k::layernorm_backward,
    .residual_layernorm_forward = k::residual_layernorm_forward,
    .residual_layernorm_backward = k::residual_layernorm_backward,
    .rmsnorm_forward = k::rmsnorm_forward, .rmsnorm_backward = k::rmsnorm_backward,
    .residual_rmsnorm_forward = k::residual_rmsnorm_forward,
    .residual_rmsnorm_backward = k::residual_rmsnorm_backward, .swiglu_forward = k::swiglu_forward,
    .swiglu_backward = k::swiglu_backward, .rope_forward = k::rope_forward,
    .rope_backward = k::rope_backward, .attention_forward = k::attention_forward,
    .attention_backward = k::attention_backward,
    .flash_attention_forward = k::flash_attention_forward,
    .flash_attention_backward = k::flash_attention_backward,
    .flash_attention_forward_mma = k::flash_attention_forward_mma,
    .flash_attention_backward_mma = k::flash_attention_backward_mma,
    // cuDNN's fused attention (kernels/cuda/cudnn_attention.cu): in the nvcc build where cuDNN 9
    // was found; never on emu.
#if !defined(GLASS_EMU) && defined(GLASS_HAS_CUDNN)
    .cudnn_attention_forward = k::cudnn_attention_forward,
    .cudnn_attention_backward = k::cudnn_attention_backward,
#else
    .cudnn_attention_forward = nullptr, .cudnn_attention_backward = nullptr,
#endif
    .embedding_forward = k::embedding_forward, .embedding_backward = k::embedding_backward,
    .adamw_step = k::adamw_step, .sgd_step = k::sgd_step,
  };
}

// `table` with its softmax forward, LayerNorm forward, RMSNorm forward, GEMM and attention forward
// entries running the selected kernel-ladder rungs instead.
Backend with_selected_rungs(Backend table) {
  table.softmax_forward = ladder::selected_softmax_forward;
  table.layernorm_forward = ladder::selected_layernorm_forward;
  table.rmsnorm_forward = ladder::selected_rmsnorm_forward;
  table.gemm = ladder::selected_gemm;
  table.flash_attention_forward = ladder::selected_attention_forward;
  return table;
}

// The production table, or its ladder copy while a rung other than production is selected.
const Backend& table_for(const char* name) {
  static const Backend production = cuda_kernel_table(name);
  static const Backend selected = with_selected_rungs(production);
  return ladder::rungs_selected() ? selected : production;
}

}  // namespace

#if defined(GLASS_EMU)
const Backend& emu_backend() { return table_for("emu"); }
#else
const Backend& cuda_backend() { return table_for("cuda"); }
#endif

}  // namespace glass::kernels
