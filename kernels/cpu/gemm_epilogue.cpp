// cpu GEMM epilogues (kernels/backend.h, GemmEpilogue): the GEMM, then the epilogue as the cpu's
// own passes, each a visible launch (the copy of the pre-activation into aux, gelu_forward or
// gelu_backward in place, sum_dim for a bias gradient). The same math cuBLASLt fuses into one
// call on cuda and emu, written with the kernels the unfused ops use, so that cpu is an
// independent reference for the fused path.
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
  // GELU with unpadded aux rows (n a multiple of 8) and beta == 0: the GEMM writes pre straight
  // into aux, and gelu_forward reads it from there.
  if (e.activation == GemmActivation::gelu && e.aux_ld == n && g.beta == 0) {
    GemmArgs into_aux = g;
    into_aux.c = e.aux;
    gemm(into_aux);
    gelu_forward(aux, c);
    return;
  }
  // C = pre = alpha op(A) op(B) (+ bias) + beta C.
  gemm(g);
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
    case GemmBiasGrad::rows_of_a: {  // bias_grad[i] = sum over l of op(A)[i][l]
      // A is stored k x m when transposed (sum its rows), else m x k (sum its columns).
      const int64_t rows = g.trans_a ? g.k : m, cols = g.trans_a ? m : g.k;
      const Tensor a = contiguous_of(g.a.as_strided({rows, cols}, {g.lda, 1}, g.a.offset()));
      sum_dim(a, e.bias_grad, g.trans_a ? 0 : 1);
      break;
    }
    case GemmBiasGrad::none:
      break;
  }
}

}  // namespace glass::kernels::cpu
