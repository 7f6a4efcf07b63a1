// The `cpu` kernel table, and the dispatch point that picks a table by device.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ladder.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass::kernels {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "add";
    case BinaryOp::sub:
      return "sub";
    case BinaryOp::mul:
      return "mul";
    case BinaryOp::div:
      return "div";
  }
  return "?";
}

namespace {
const Backend cpu_backend{
    .name = "cpu",
    .fill = cpu::fill,
    .copy = cpu::copy,
    .cast = cpu::cast,
    .fill_normal = cpu::fill_normal,
    .fill_uniform = cpu::fill_uniform,
    .binary = cpu::binary,
    .affine = cpu::affine,
    .pow_scalar = cpu::pow_scalar,
    .gelu_forward = cpu::gelu_forward,
    .gelu_backward = cpu::gelu_backward,
    .dropout_forward = cpu::dropout_forward,
    .dropout_backward = cpu::dropout_backward,
    .sum_dim = cpu::sum_dim,
    .sum_squares = cpu::sum_squares,
    .clip_scale = cpu::clip_scale,
    .step_status = cpu::step_status,
    .gemm = cpu::gemm,
    .gemm_epilogue = cpu::gemm_epilogue,
    .softmax_forward = cpu::softmax_forward,
    .softmax_backward = cpu::softmax_backward,
    .log_softmax_forward = cpu::log_softmax_forward,
    .log_softmax_backward = cpu::log_softmax_backward,
    .cross_entropy_forward = cpu::cross_entropy_forward,
    .cross_entropy_backward = cpu::cross_entropy_backward,
    .fused_classifier = cpu::fused_classifier,
    .layernorm_forward = cpu::layernorm_forward,
    .layernorm_backward = cpu::layernorm_backward,
    .residual_layernorm_forward = cpu::residual_layernorm_forward,
    .residual_layernorm_backward = cpu::residual_layernorm_backward,
    .rmsnorm_forward = cpu::rmsnorm_forward,
    .rmsnorm_backward = cpu::rmsnorm_backward,
    .residual_rmsnorm_forward = cpu::residual_rmsnorm_forward,
    .residual_rmsnorm_backward = cpu::residual_rmsnorm_backward,
    .swiglu_forward = cpu::swiglu_forward,
    .swiglu_backward = cpu::swiglu_backward,
    .rope_forward = cpu::rope_forward,
    .rope_backward = cpu::rope_backward,
    .attention_forward = cpu::attention_forward,
    .attention_backward = cpu::attention_backward,
    .flash_attention_forward = cpu::flash_attention_forward,
    .flash_attention_backward = cpu::flash_attention_backward,
    .flash_attention_forward_mma = nullptr,  // emu and cuda only
    .flash_attention_backward_mma = nullptr,
    .cudnn_attention_forward = nullptr,  // cuda only
    .cudnn_attention_backward = nullptr,
    .embedding_forward = cpu::embedding_forward,
    .embedding_backward = cpu::embedding_backward,
    .adamw_step = cpu::adamw_step,
    .sgd_step = cpu::sgd_step,
};
}  // namespace

#if defined(GLASS_HAS_EMU)
const Backend& emu_backend();  // kernels/cuda/backend_table.cu, compiled for emu
#endif
#if defined(GLASS_HAS_CUDA)
const Backend& cuda_backend();  // kernels/cuda/backend_table.cu, compiled by nvcc
#endif

const Backend& backend(Device d) {
  switch (d.kind) {
    case DeviceKind::cpu: {
      // GLASS_KERNEL_VARIANT picks rungs of the emu/cuda kernel ladders, which cpu has none of.
      // It is still parsed, by the parser emu uses, so that a bad value is the same error on
      // every device instead of passing silently on cpu. Once: a bad value throws at each call.
      [[maybe_unused]] static const bool variant_checked = (ladder::selection_from_env(), true);
      return cpu_backend;
    }
    case DeviceKind::emu:
#if defined(GLASS_HAS_EMU)
      return emu_backend();
#else
      break;
#endif
    case DeviceKind::cuda:
#if defined(GLASS_HAS_CUDA)
      glass::cuda::require_device(d.index);  // the one clear error line when there is no such GPU
      return cuda_backend();
#else
      break;
#endif
    case DeviceKind::meta:
      // The emu table's host launchers, whose launches the gateway reports without running them
      // (engine/launch.h): the kernel names, grids, FLOPs and bytes of the same .cu sources that
      // the cuda table is compiled from.
#if defined(GLASS_HAS_EMU)
      return emu_backend();
#else
      break;
#endif
  }
  fail("no kernels for device {}", d.str());
}

}  // namespace glass::kernels
