// The dispatch point: a table of kernel entry points per device.
//
// autograd/ and optim/ call `backend(t.device()).layernorm_forward(...)`; which code runs is
// decided here and nowhere else. The table's entries, their contracts and the devices each one
// exists on are listed once, in kernels/kernel_list.inc. kernels/cpu fills the `cpu` table; `cuda`
// and `emu` get tables of their own, filled from kernels/cuda. Every entry launches through
// glass::launch, so each call is one or more visible launches.
#pragma once

#include <cstdint>
#include <span>

#include "engine/rng.h"
#include "engine/tensor.h"

namespace glass::kernels {

// One parameter of an AdamW step: the parameter, its gradient and both moments (f32, contiguous,
// one shape, one device), and the weight decay that applies to it (0 for biases and norms).
// `copy`, when defined, is the parameter's bf16 working copy (nn/module.h: mixed precision;
// contiguous, its shape and device): the step writes the parameter's new value into it rounded to
// nearest even, the bits a cast of the updated parameter gives, in the same pass (a step that the
// finite gate skips writes the unchanged parameter's).
struct AdamWParam {
  Tensor param, grad, m, v;
  double weight_decay = 0;
  Tensor copy{};
};
// The step's hyper-parameters; `step` counts from 1 (bias correction).
struct AdamWHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0;
  int64_t step = 0;
  // emu and cuda: the step's scalars in device memory, f32 [adamw_table_size(n)] on the params'
  // device, filled with adamw_scalar_table(params, *this) (kernels/optim_math.h) by the caller,
  // so that a CUDA graph that captured the launch reads each replay's values (optim/adamw.h);
  // undefined: the launcher uploads them itself. cpu reads the fields above.
  Tensor scalars{};
  // The finite gate (optim/step_status.h): f64 [1] on the params' device, read by the kernel;
  // 0 there leaves every parameter and moment as it is (a step whose loss or gradient norm is
  // not finite). Undefined: always update.
  Tensor finite{};
};

enum class BinaryOp : uint8_t { add, sub, mul, div };
const char* binary_op_name(BinaryOp op);

// Row-major, strided-batched GEMM, the shape cuBLAS takes (in column-major clothes):
//   C[i] = alpha * op(A[i]) @ op(B[i]) (+ bias broadcast over rows) + beta * C[i],  i < batch
// op(A) is m x k: A is stored m x k (lda >= k) or, with trans_a, k x m (lda >= m). Likewise B.
// A batch stride of 0 reuses one matrix for every batch entry. `bias` (n values) may be undefined.
struct GemmArgs {
  Tensor a, b, c, bias;  // data pointers come from these; their shapes are not read
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  double alpha = 1, beta = 0;
};

// --- GEMM epilogues: what cuBLASLt fuses into a GEMM, in GemmArgs' row-major terms ---
// C is m x n (row i, column j), contiguous (ldc == n), batch 1, and
//   pre[i][j] = alpha (op(A) op(B))[i][j] (+ bias[j]) + beta C[i][j].
// activation:
//   none           C = pre
//   gelu           aux = pre, C = gelu(pre)     (forward; aux is kept for backward)
//   gelu_backward  C = pre * gelu'(aux)         (aux: the pre-activation gelu saw in forward)
// bias_grad (an output, undefined for none; GemmArgs' bias must then be undefined):
//   rows_of_a      bias_grad[i] = sum over l of op(A)[i][l]   ([m]; dB of y = x W^T + b with
//                                                             A = dy^T)
//   columns_of_c   bias_grad[j] = sum over i of C[i][j]       ([n]; only with gelu_backward)
// aux is m x n with row stride aux_ld = gemm_aux_ld(n) (cuBLASLt wants a multiple of 8), of C's
// dtype. gelu is the tanh approximation of gelu_forward.
enum class GemmActivation : uint8_t { none, gelu, gelu_backward };
enum class GemmBiasGrad : uint8_t { none, rows_of_a, columns_of_c };
struct GemmEpilogue {
  GemmActivation activation = GemmActivation::none;
  Tensor aux{};
  int64_t aux_ld = 0;
  GemmBiasGrad bias_grad_of = GemmBiasGrad::none;
  Tensor bias_grad{};
};
inline int64_t gemm_aux_ld(int64_t n) { return (n + 7) / 8 * 8; }
void check_gemm_epilogue(const GemmArgs& g, const GemmEpilogue& e);  // throws naming the problem
const char* gemm_epilogue_name(const GemmEpilogue& e);  // e.g. "gelu_bias", "dgelu_bgrad"
// After a GEMM has written pre into C: the epilogue's activation and C's column sums as separate
// launches of C's device's kernels (aux = pre by a copy, gelu_forward or gelu_backward in place,
// sum_dim). cpu's epilogue is the GEMM and this; so is cuda's where cuBLASLt has no algorithm.
void gemm_epilogue_passes(const GemmArgs& g, const GemmEpilogue& e);
// cuda and emu: every GEMM cuBLASLt would run (a bias, an epilogue, TF32) as a cuBLAS GEMM and
// separate launches instead, as for a shape cuBLASLt has no algorithm for (TF32 is then not used).
// Off by default; for tests, and for timing the fused path against the unfused one on a GPU.
void set_gemm_epilogues_in_passes(bool enabled);
bool gemm_epilogues_in_passes();

// TF32 for f32 GEMMs on cuda and emu (cuBLASLt's CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to
// 10 mantissa bits, f32 accumulation). Off by default, so that f32 stays the reference; a
// process-wide switch (train_gpt --tf32). cpu has no TF32 and ignores it.
void set_tf32(bool enabled);
bool tf32_enabled();

// The kernel table: one function pointer per entry of kernels/kernel_list.inc, where each entry's
// contract is documented. An entry the list marks absent on a device is null in its table.
struct Backend {
  const char* name;
#define GLASS_KERNEL(kernel, on, params) void(*kernel) params;
#include "kernels/kernel_list.inc"
};

// Where a kernel of the list exists (GLASS_KERNEL's `on`, kernels/kernel_list.inc).
enum class KernelOn : uint8_t { every, emu_cuda, cudnn };
// Whether a table of `device` must have a kernel that exists `on` there: every: all devices;
// emu_cuda: emu and cuda (and meta, which plans with emu's table); cudnn: never required (cuda
// has it when built with cuDNN).
constexpr bool kernel_required(KernelOn on, DeviceKind device) {
  switch (on) {
    case KernelOn::every:
      return true;
    case KernelOn::emu_cuda:
      return device != DeviceKind::cpu;
    case KernelOn::cudnn:
      return false;
  }
  return false;
}
// Whether a table of `device` may have it at all (cudnn: cuda only).
constexpr bool kernel_allowed(KernelOn on, DeviceKind device) {
  return kernel_required(on, device) || (on == KernelOn::cudnn && device == DeviceKind::cuda);
}

// The head dims the hand-written FlashAttention kernels of emu and cuda take.
constexpr int64_t kFlashMinHeadDim = 16, kFlashMaxHeadDim = 128;  // and multiples of 8
constexpr bool flash_head_dim_ok(int64_t D) {
  return D % 8 == 0 && D >= kFlashMinHeadDim && D <= kFlashMaxHeadDim;
}

// The head dims of the Tensor Core FlashAttention kernel (bf16).
constexpr bool flash_mma_head_dim_ok(int64_t D) { return D == 32 || D == 64 || D == 128; }

const Backend& backend(Device d);
inline const Backend& backend(const Tensor& t) { return backend(t.device()); }

}  // namespace glass::kernels
