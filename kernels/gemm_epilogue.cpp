// The device-neutral part of GEMM epilogues (kernels/backend.h): the argument checks every device
// makes, the epilogues' names, and the process-wide TF32 switch.
#include <atomic>

#include "kernels/backend.h"

namespace glass::kernels {

namespace {
std::atomic<bool> g_tf32{false};
}  // namespace

void set_tf32(bool enabled) { g_tf32.store(enabled); }
bool tf32_enabled() { return g_tf32.load(); }

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
