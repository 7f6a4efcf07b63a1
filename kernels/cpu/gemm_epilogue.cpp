// cpu GEMM epilogues (kernels/backend.h, GemmEpilogue): the GEMM, then the epilogue as the cpu's
// own passes, each a visible launch (gemm_epilogue_passes, kernels/gemm_epilogue.cpp: the copy of
// the pre-activation into aux, gelu_forward or gelu_backward in place, sum_dim for C's column
// sums; cuda runs the same passes where cuBLASLt has no algorithm). The same math cuBLASLt fuses
// into one call on cuda and emu, written with the kernels the unfused ops use, so that cpu is an
// independent reference for the fused path. The one exception is the row sums of A (a linear
// layer's bias gradient): glass's GEMM takes them while it packs A (`gemm_bgrad_a`), because a
// sum_dim of its own read the whole of dy from memory again, 12 of 18 sum_dim launches of the
// default model's step (bench/RESULTS.md, 2026-12-04); tests/engine/test_sgemm.cpp checks them
// against a double loop. bf16 goes to gemm_bf16 (kernels/cpu/gemm_bf16.cpp), which holds the
// product in f32 through these passes and rounds each result once.
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

void gemm_epilogue(const GemmArgs& g, const GemmEpilogue& e) {
  check_gemm_epilogue(g, e);
  if (g.c.dtype() == DType::bf16) {  // the epilogue in f32 before the one rounding (gemm_bf16.cpp)
    check_gemm_args(g);
    return gemm_bf16(g, e);
  }
  // pre = alpha op(A) op(B) (+ bias) + beta C into args.c, and op(A)'s row sums with it when asked
  const auto product = [&](const GemmArgs& args) {
    if (e.bias_grad_of == GemmBiasGrad::rows_of_a)
      gemm_with_row_sums_of_a(args, e.bias_grad);
    else
      gemm(args);
  };
  // GELU with unpadded aux rows (n a multiple of 8) and beta == 0: the GEMM writes pre straight
  // into aux, and gelu_forward reads it from there.
  if (e.activation == GemmActivation::gelu && e.aux_ld == g.n && g.beta == 0) {
    GemmArgs into_aux = g;
    into_aux.c = e.aux;
    product(into_aux);
    gelu_forward(e.aux.as_strided({g.m, g.n}, {g.n, 1}, e.aux.offset()),
                 g.c.as_strided({g.m, g.n}, {g.n, 1}, g.c.offset()));
    return;
  }
  product(g);                  // C = pre (and the row sums of A: the GEMM took them)
  gemm_epilogue_passes(g, e);  // aux, the activation, C's column sums
}

}  // namespace glass::kernels::cpu
