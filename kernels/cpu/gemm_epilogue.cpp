// cpu GEMM epilogues (kernels/backend.h, GemmEpilogue): the GEMM, then the epilogue as the cpu's
// own passes, each a visible launch (the copy of the pre-activation into aux, gelu_forward or
// gelu_backward in place, sum_dim for C's column sums). The same math cuBLASLt fuses into one
// call on cuda and emu, written with the kernels the unfused ops use, so that cpu is an
// independent reference for the fused path. The one exception is the row sums of A (a linear
// layer's bias gradient): glass's GEMM takes them while it packs A (`gemm_bgrad_a`), because a
// sum_dim of its own read the whole of dy from memory again, 12 of 18 sum_dim launches of the
// default model's step (bench/RESULTS.md, 2026-12-04); tests/engine/test_sgemm.cpp checks them
// against a double loop.
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// t itself when contiguous, else a contiguous copy (sum_dim and gelu_backward read contiguous).
Tensor contiguous_of(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = Tensor::empty(t.shape(), t.dtype(), t.device());
  copy(t, c);
  return c;
}

}  // namespace

void gemm_epilogue(const GemmArgs& g, const GemmEpilogue& e) {
  check_gemm_epilogue(g, e);
  const int64_t m = g.m, n = g.n;
  const Tensor c = g.c.as_strided({m, n}, {n, 1}, g.c.offset());
  const Tensor aux =
      e.aux.defined() ? e.aux.as_strided({m, n}, {e.aux_ld, 1}, e.aux.offset()) : Tensor();
  // pre = alpha op(A) op(B) (+ bias) + beta C into args.c, and op(A)'s row sums with it when asked
  const auto product = [&](const GemmArgs& args) {
    if (e.bias_grad_of == GemmBiasGrad::rows_of_a)
      gemm_with_row_sums_of_a(args, e.bias_grad);
    else
      gemm(args);
  };
  // GELU with unpadded aux rows (n a multiple of 8) and beta == 0: the GEMM writes pre straight
  // into aux, and gelu_forward reads it from there.
  if (e.activation == GemmActivation::gelu && e.aux_ld == n && g.beta == 0) {
    GemmArgs into_aux = g;
    into_aux.c = e.aux;
    product(into_aux);
    gelu_forward(aux, c);
    return;
  }
  product(g);  // C = pre
  switch (e.activation) {
    case GemmActivation::gelu:  // aux = pre; C = gelu(pre)
      copy(c, aux);
      gelu_forward(c, c);
      break;
    case GemmActivation::gelu_backward:  // C = pre * gelu'(aux)
      gelu_backward(contiguous_of(aux), c, c);
      break;
    case GemmActivation::none:
      break;
  }
  switch (e.bias_grad_of) {
    case GemmBiasGrad::columns_of_c:  // bias_grad[j] = sum over i of C[i][j]
      sum_dim(c, e.bias_grad, 0);
      break;
    case GemmBiasGrad::rows_of_a:  // bias_grad[i] = sum over l of op(A)[i][l]: the GEMM took it
    case GemmBiasGrad::none:
      break;
  }
}

}  // namespace glass::kernels::cpu
