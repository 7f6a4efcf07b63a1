// The device-neutral part of GEMM epilogues (kernels/backend.h): the argument checks every device
// makes, the epilogues' names, the epilogue as separate passes (cpu's, and cuda's where cuBLASLt
// has no algorithm), and the process-wide switches.
#include <atomic>

#include "kernels/backend.h"

namespace glass::kernels {

namespace {
std::atomic<bool> g_tf32{false};
std::atomic<bool> g_in_passes{false};

// t itself when contiguous, else a contiguous copy on its device (gelu_backward and sum_dim read
// contiguous tensors; a padded aux is not).
Tensor contiguous_of(const Backend& be, const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = Tensor::empty(t.shape(), t.dtype(), t.device());
  be.copy(t, c);
  return c;
}
}  // namespace

void set_tf32(bool enabled) { g_tf32.store(enabled); }
bool tf32_enabled() { return g_tf32.load(); }
void set_gemm_epilogues_in_passes(bool enabled) { g_in_passes.store(enabled); }
bool gemm_epilogues_in_passes() { return g_in_passes.load(); }

void gemm_epilogue_passes(const GemmArgs& g, const GemmEpilogue& e) {
  if (e.activation == GemmActivation::none && e.bias_grad_of != GemmBiasGrad::columns_of_c) return;
  const Backend& be = backend(g.c.device());
  const Tensor c = g.c.as_strided({g.m, g.n}, {g.n, 1}, g.c.offset());
  const Tensor aux =
      e.aux.defined() ? e.aux.as_strided({g.m, g.n}, {e.aux_ld, 1}, e.aux.offset()) : Tensor();
  switch (e.activation) {
    case GemmActivation::gelu:  // aux = pre; C = gelu(pre)
      be.copy(c, aux);
      be.gelu_forward(c, c);
      break;
    case GemmActivation::gelu_backward:  // C = pre * gelu'(aux)
      be.gelu_backward(contiguous_of(be, aux), c, c);
      break;
    case GemmActivation::none:
      break;
  }
  if (e.bias_grad_of == GemmBiasGrad::columns_of_c)  // bias_grad[j] = sum over i of C[i][j]
    be.sum_dim(c, e.bias_grad, 0);
}

const char* gemm_epilogue_name(const GemmEpilogue& e) {
  switch (e.activation) {
    case GemmActivation::gelu:
      return "gelu_aux";
    case GemmActivation::gelu_backward:
      return e.bias_grad_of == GemmBiasGrad::columns_of_c ? "dgelu_bgrad" : "dgelu";
    case GemmActivation::none:
      break;
  }
  return e.bias_grad_of == GemmBiasGrad::rows_of_a ? "bgrad_a" : "default";
}

void check_gemm_epilogue(const GemmArgs& g, const GemmEpilogue& e) {
  const char* name = gemm_epilogue_name(e);
  GLASS_CHECK(g.c.defined() && g.batch == 1 && g.ldc == std::max<int64_t>(g.n, 1),
              "gemm epilogue {}: C must be one contiguous m x n matrix (batch {}, ldc {}, n {})",
              name, g.batch, g.ldc, g.n);
  const auto like_c = [&](const Tensor& t, const char* what, int64_t numel) {
    GLASS_CHECK(t.defined() && t.is_contiguous() && t.numel() == numel &&
                    t.dtype() == g.c.dtype() && t.device() == g.c.device(),
                "gemm epilogue {}: {} {} must be contiguous with {} values of C's dtype and "
                "device ({})",
                name, what, t.describe(), numel, g.c.describe());
  };
  if (e.activation == GemmActivation::none) {
    GLASS_CHECK(!e.aux.defined(), "gemm epilogue {}: aux {} is only for gelu and gelu_backward",
                name, e.aux.describe());
  } else {
    GLASS_CHECK(e.aux_ld == gemm_aux_ld(g.n), "gemm epilogue {}: aux_ld {} must be {} for n = {}",
                name, e.aux_ld, gemm_aux_ld(g.n), g.n);
    like_c(e.aux, "aux", g.m * e.aux_ld);
  }
  switch (e.bias_grad_of) {
    case GemmBiasGrad::none:
      GLASS_CHECK(!e.bias_grad.defined(), "gemm epilogue {}: bias_grad {} without bias_grad_of",
                  name, e.bias_grad.describe());
      break;
    case GemmBiasGrad::rows_of_a:
      like_c(e.bias_grad, "bias_grad (rows of A)", g.m);
      break;
    case GemmBiasGrad::columns_of_c:
      GLASS_CHECK(e.activation == GemmActivation::gelu_backward,
                  "gemm epilogue {}: the column sums of C come only with gelu_backward", name);
      like_c(e.bias_grad, "bias_grad (columns of C)", g.n);
      break;
  }
  GLASS_CHECK(!g.bias.defined() || (e.bias_grad_of == GemmBiasGrad::none &&
                                    e.activation != GemmActivation::gelu_backward),
              "gemm epilogue {}: a bias {} cannot be added here (cuBLASLt's bias pointer is the "
              "bias gradient's)",
              name, g.bias.describe());
}

}  // namespace glass::kernels
