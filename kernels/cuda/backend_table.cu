// The `emu` kernel table: the host launchers of kernels/cuda, compiled for the emulator (this
// file is built with the .cu sources into glass_kernels_emu). kernels::backend(Device) in
// kernels/cpu/backend_cpu.cpp hands it out for DeviceKind::emu.
#include "kernels/cuda/cuda_kernels.h"

namespace glass::kernels {

const Backend& emu_backend() {
  static const Backend table{
      .name = "emu",
      .fill = cuda::fill,
      .copy = cuda::copy,
      .cast = cuda::cast,
      .fill_normal = cuda::fill_normal,
      .fill_uniform = cuda::fill_uniform,
      .binary = cuda::binary,
      .affine = cuda::affine,
      .pow_scalar = cuda::pow_scalar,
      .gelu_forward = cuda::gelu_forward,
      .gelu_backward = cuda::gelu_backward,
      .dropout_forward = cuda::dropout_forward,
      .dropout_backward = cuda::dropout_backward,
      .sum_dim = cuda::sum_dim,
      .sum_squares = cuda::sum_squares,
      .gemm = cuda::gemm,
      .softmax_forward = cuda::softmax_forward,
      .softmax_backward = cuda::softmax_backward,
      .log_softmax_forward = cuda::log_softmax_forward,
      .log_softmax_backward = cuda::log_softmax_backward,
      .cross_entropy_forward = cuda::cross_entropy_forward,
      .cross_entropy_backward = cuda::cross_entropy_backward,
      .layernorm_forward = cuda::layernorm_forward,
      .layernorm_backward = cuda::layernorm_backward,
      .attention_forward = cuda::attention_forward,
      .attention_backward = cuda::attention_backward,
      .embedding_forward = cuda::embedding_forward,
      .embedding_backward = cuda::embedding_backward,
      .adamw_step = cuda::adamw_step,
      .sgd_step = cuda::sgd_step,
  };
  return table;
}

}  // namespace glass::kernels
