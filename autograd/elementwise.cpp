// Differentiable elementwise ops: add, sub, mul, div with NumPy broadcasting, the scalar ops
// (add, mul, neg, pow), GELU and dropout. Each op's forward and backward sit side by side.
//
// Broadcasting never copies: both operands are expanded (stride 0) to the common shape and the
// binary kernel reads them in place. Backward forms each input's gradient at the broadcast shape
// and sums it back to the input's shape (sum_to). Kernels that need contiguous input get it from
// contiguous(), which records itself (and its copy) on the tape when it has to copy.
#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {

using kernels::BinaryOp;

void check_floating(const char* op, const Tensor& x) {
  GLASS_CHECK(is_floating(x.dtype()), "{}: expects a floating tensor, got {}", op, x.describe());
}

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  check_floating(op, a);
  GLASS_CHECK(a.dtype() == b.dtype(), "{}: dtypes differ: {} and {}", op, a.describe(),
              b.describe());
  GLASS_CHECK(a.device() == b.device(), "{}: devices differ: {} and {}", op, a.describe(),
              b.describe());
}

// The gradients of a binary op at the broadcast shape, from dy and the node's saved tensors.
using BinaryGrads = InputGrads (*)(Node& n, const Tensor& dy);

Tensor finish_binary(OpScope& scope, Tensor out, const Tensor& a, const Tensor& b, bool save_inputs,
                     BinaryGrads grads);

// out = a op b over the broadcast shape; saves a and b when the gradients need them.
Tensor broadcast_binary(BinaryOp op, const Tensor& a, const Tensor& b, bool save_inputs,
                        BinaryGrads grads) {
  const char* name = kernels::binary_op_name(op);
  check_pair(name, a, b);
  OpScope scope(name, {a, b});
  if (a.shape() == b.shape()) {  // nothing to broadcast: no views to make
    Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
    kernels::backend(a).binary(op, a, b, out);
    return finish_binary(scope, std::move(out), a, b, save_inputs, grads);
  }
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  kernels::backend(a).binary(op, expand(a.detach(), shape), expand(b.detach(), shape), out);
  return finish_binary(scope, std::move(out), a, b, save_inputs, grads);
}

// Records the node of a binary op (when the scope records one): its gradients at the broadcast
// shape, summed back to each input's shape.
Tensor finish_binary(OpScope& scope, Tensor out, const Tensor& a, const Tensor& b, bool save_inputs,
                     BinaryGrads grads) {
  if (!scope.needs_grad()) return scope.finish(std::move(out), {}, nullptr);
  std::vector<Tensor> saved;
  if (save_inputs) saved = {a, b};
  return scope.finish(std::move(out), std::move(saved), [grads](Node& n, const Tensor& dy) {
    // Gradients at the broadcast shape, then summed over what broadcasting repeated.
    InputGrads g = grads(n, dy);
    for (size_t i = 0; i < 2; ++i) {
      if (!n.needs_input_grad(i))
        g[i] = Tensor();
      else if (g[i].shape() != n.inputs[i].shape)  // sum_to's first test, here to skip its call
        g[i] = sum_to(g[i], n.inputs[i].shape);
    }
    return g;
  });
}

// out = x * mul + add elementwise; dx = dy * mul.
Tensor affine_op(const char* op, const Tensor& x, double mul, double add) {
  check_floating(op, x);
  const Tensor xc = contiguous(x);
  OpScope scope(op, {xc});
  Tensor out = empty_like(xc);
  kernels::backend(xc).affine(xc, out, mul, add);
  return scope.finish(std::move(out), {}, [mul](Node&, const Tensor& dy) -> InputGrads {
    if (mul == 1) return {dy};
    const Tensor dyc = contiguous(dy);
    Tensor dx = empty_like(dyc);
    kernels::backend(dyc).affine(dyc, dx, mul, 0);
    return {dx};
  });
}

}  // namespace

// d(a + b) = (dy, dy)
Tensor add(const Tensor& a, const Tensor& b, CallSite site) {
  CallSiteScope at(site);
  return broadcast_binary(BinaryOp::add, a, b, false, [](Node&, const Tensor& dy) {
    return InputGrads{dy, dy};
  });
}

// d(a - b) = (dy, -dy)
Tensor sub(const Tensor& a, const Tensor& b, CallSite site) {
  CallSiteScope at(site);
  return broadcast_binary(BinaryOp::sub, a, b, false, [](Node& n, const Tensor& dy) {
    return InputGrads{dy, n.needs_input_grad(1) ? neg(dy) : Tensor()};
  });
}

// d(a * b) = (dy * b, dy * a)
Tensor mul(const Tensor& a, const Tensor& b, CallSite site) {
  CallSiteScope at(site);
  return broadcast_binary(BinaryOp::mul, a, b, true, [](Node& n, const Tensor& dy) {
    const Tensor &a = n.saved[0], &b = n.saved[1];
    return InputGrads{n.needs_input_grad(0) ? mul(dy, b) : Tensor(),
                      n.needs_input_grad(1) ? mul(dy, a) : Tensor()};
  });
}

// d(a / b) = (dy / b, -(dy / b) * a / b)
Tensor div(const Tensor& a, const Tensor& b, CallSite site) {
  CallSiteScope at(site);
  return broadcast_binary(BinaryOp::div, a, b, true, [](Node& n, const Tensor& dy) {
    const Tensor &a = n.saved[0], &b = n.saved[1];
    const Tensor dy_over_b = div(dy, b);
    return InputGrads{dy_over_b, n.needs_input_grad(1) ? neg(div(mul(dy_over_b, a), b)) : Tensor()};
  });
}

Tensor add(const Tensor& a, double s, CallSite site) {
  CallSiteScope at(site);
  return affine_op("add_scalar", a, 1, s);
}
Tensor mul(const Tensor& a, double s, CallSite site) {
  CallSiteScope at(site);
  return affine_op("mul_scalar", a, s, 0);
}
Tensor neg(const Tensor& a, CallSite site) {
  CallSiteScope at(site);
  return affine_op("neg", a, -1, 0);
}

// y = x^p; dx = dy * p x^(p-1)
Tensor pow(const Tensor& a, double p, CallSite site) {
  CallSiteScope at(site);
  check_floating("pow", a);
  const Tensor x = contiguous(a);
  OpScope scope("pow", {x});
  Tensor y = empty_like(x);
  kernels::backend(x).pow_scalar(x, y, p);
  return scope.finish(std::move(y), {x}, [p](Node& n, const Tensor& dy) -> InputGrads {
    const Tensor& x = n.saved[0];
    const kernels::Backend& k = kernels::backend(x);
    Tensor dx = empty_like(x);
    k.pow_scalar(x, dx, p - 1);                       // x^(p-1)
    k.affine(dx, dx, p, 0);                           // p x^(p-1)
    k.binary(BinaryOp::mul, contiguous(dy), dx, dx);  // dy p x^(p-1)
    return {dx};
  });
}

Tensor gelu(const Tensor& a, CallSite site) {
  CallSiteScope at(site);
  check_floating("gelu", a);
  const Tensor x = contiguous(a);
  OpScope scope("gelu", {x});
  Tensor y = empty_like(x);
  kernels::backend(x).gelu_forward(x, y);
  // dx = dy gelu'(x)
  return scope.finish(std::move(y), {x}, [](Node& n, const Tensor& dy) -> InputGrads {
    Tensor dx = empty_like(n.saved[0]);
    kernels::backend(dy).gelu_backward(n.saved[0], contiguous(dy), dx);
    return {dx};
  });
}

// y = x * mask / (1 - p), mask from Philox words [offset, offset + numel) of `gen`; backward
// regenerates the same mask from (seed, offset). Under a CUDA graph capture the offset is
// relative to a base the kernels read on the device (Generator::offsets_from_device).
Tensor dropout(const Tensor& a, double p, bool training, Generator& gen, CallSite site) {
  CallSiteScope at(site);
  check_floating("dropout", a);
  GLASS_CHECK(p >= 0 && p <= 1, "dropout: probability {} is outside [0, 1] for {}", p,
              a.describe());
  if (!training || p == 0) return a;
  const Tensor x = contiguous(a);
  OpScope scope("dropout", {x});
  const PhiloxArgs rng = gen.next(static_cast<uint64_t>(x.numel()));
  Tensor y = empty_like(x);
  kernels::backend(x).dropout_forward(x, y, p, rng);
  // dx = dy mask / (1 - p), the same Philox mask regenerated
  return scope.finish(std::move(y), {}, [p, rng](Node&, const Tensor& dy) -> InputGrads {
    const Tensor dyc = contiguous(dy);
    Tensor dx = empty_like(dyc);
    kernels::backend(dyc).dropout_backward(dyc, dx, p, rng);
    return {dx};
  });
}

}  // namespace glass
