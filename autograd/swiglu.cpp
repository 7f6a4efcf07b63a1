// swiglu: SwiGLU's activation (Llama's MLP) on the fused gate/up projection, forward and backward
// side by side.
//
// gate_up [..., 2F] (gate = the first F columns, up = the last F) -> silu(gate) * up [..., F],
// silu(g) = g sigmoid(g). One kernel each way; backward writes both halves of one dgate_up.
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

Tensor swiglu(const Tensor& gate_up, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(gate_up.dim() >= 1 && gate_up.size(-1) > 0 && gate_up.size(-1) % 2 == 0,
              "swiglu: gate_up {} must be [..., 2F] with an even, non-zero last dimension",
              gate_up.describe());
  GLASS_CHECK(is_floating(gate_up.dtype()), "swiglu: gate_up {} must be floating",
              gate_up.describe());
  Tensor in = contiguous(gate_up);
  OpScope op("swiglu", {in});
  Shape shape = in.shape();
  shape.back() /= 2;
  Tensor out = Tensor::empty(shape, in.dtype(), in.device());
  kernels::backend(in).swiglu_forward(in, out);
  // dgate = dout up silu'(gate), dup = dout silu(gate)
  return op.finish(std::move(out), {in}, [](Node& n, const Tensor& dout) -> InputGrads {
    const Tensor& in = n.saved[0];
    Tensor dgate_up = empty_like(in);
    kernels::backend(in).swiglu_backward(in, contiguous(dout), dgate_up);
    return {dgate_up};
  });
}

}  // namespace glass
