// Differentiable matrix products: matmul (batched, broadcasting batch dimensions) and linear.
//
// Every product goes to one strided-batched GEMM. An operand whose last two dimensions are
// row-major is passed as it is; one that is a transposed view (column-major) is passed with the
// GEMM's transpose flag; only other layouts are copied. The batch must step by a single stride
// (0 for a broadcast operand). So backward's dA = dC B^T and dB = A^T dC are GEMMs on transposed
// views, never physical transposes. A row-major A against a broadcast B folds its batch into
// the rows: [B, T, k] @ [k, n] is one [B*T, k] @ [k, n] GEMM.
#include <optional>

#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {

// How one operand reaches the GEMM: the tensor holding it, whether BLAS reads it transposed, its
// leading dimension and the distance between consecutive batch matrices.
struct GemmOperand {
  Tensor t;
  bool trans = false;
  int64_t ld = 1, batch_stride = 0;
};

// The single stride that steps through the first `nb` (batch) dimensions of t in row-major
// order, or none when they do not collapse to one (size-1 dimensions are ignored).
std::optional<int64_t> batch_stride(const Tensor& t, int nb) {
  std::optional<int64_t> stride;
  int64_t next = 0;  // what the next outer dimension's stride must be
  for (int d = nb - 1; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (stride && t.stride(d) != next) return std::nullopt;
    if (!stride) stride = t.stride(d);
    next = t.stride(d) * t.size(d);
  }
  return stride.value_or(0);
}

// t ([..., rows, cols]) broadcast to `batch` + [rows, cols], as a GEMM operand: rows contiguous
// (no flag), columns contiguous (transposed flag), or else a contiguous copy.
GemmOperand gemm_operand(const Tensor& t, const Shape& batch) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  Shape full = batch;
  full.insert(full.end(), {rows, cols});
  const Tensor e = expand(t.detach(), full);
  const int nb = static_cast<int>(batch.size());
  const std::optional<int64_t> bs = batch_stride(e, nb);
  const int64_t rs = e.stride(-2), cs = e.stride(-1);
  if (bs && (cols <= 1 || cs == 1) && (rows <= 1 || rs >= cols))
    return {e, false, rows <= 1 || cols == 0 ? std::max<int64_t>(cols, 1) : rs, *bs};
  if (bs && (rows <= 1 || rs == 1) && (cols <= 1 || cs >= rows))
    return {e, true, cols <= 1 || rows == 0 ? std::max<int64_t>(rows, 1) : cs, *bs};
  Tensor c = Tensor::empty(full, t.dtype(), t.device());
  kernels::backend(t).copy(e, c);
  return {c, false, std::max<int64_t>(cols, 1), rows * cols};
}

// a [..., m, k] @ b [..., k, n] (+ bias [n]) with both batches broadcast to `batch`: one GEMM
// into a fresh contiguous [batch..., m, n].
Tensor gemm_product(const Tensor& a, const Tensor& b, const Tensor& bias, const Shape& batch) {
  const GemmOperand A = gemm_operand(a, batch), B = gemm_operand(b, batch);
  kernels::GemmArgs g;
  g.m = a.size(-2);
  g.k = a.size(-1);
  g.n = b.size(-1);
  g.batch = shape_numel(batch);
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), {g.m, g.n});
  Tensor c = Tensor::empty(out_shape, a.dtype(), a.device());
  g.a = A.t;
  g.b = B.t;
  g.c = c;
  g.bias = bias;
  g.trans_a = A.trans;
  g.trans_b = B.trans;
  g.lda = A.ld;
  g.ldb = B.ld;
  g.ldc = std::max<int64_t>(g.n, 1);
  g.stride_a = A.batch_stride;
  g.stride_b = B.batch_stride;
  g.stride_c = g.m * g.n;
  // One B for every batch entry and A's rows continuing from matrix to matrix: fold the batch
  // into the rows of one GEMM.
  if (g.batch > 1 && B.batch_stride == 0 && !A.trans && A.batch_stride == g.m * A.ld) {
    g.m *= g.batch;
    g.batch = 1;
    g.stride_a = g.stride_c = 0;
  }
  kernels::backend(c).gemm(g);
  return c;
}

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

void check_operands(const char* op, const Tensor& a, const Tensor& b) {
  GLASS_CHECK(is_floating(a.dtype()) && a.dtype() == b.dtype() && a.device() == b.device(),
              "{}: operands {} and {} must be floating, of one dtype and on one device", op,
              a.describe(), b.describe());
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, CallSite site) {
  CallSiteScope at(site);
  check_operands("matmul", a, b);
  GLASS_CHECK(a.dim() >= 2 && b.dim() >= 2 && a.size(-1) == b.size(-2),
              "matmul: {} @ {}: expects [..., m, k] @ [..., k, n]", a.describe(), b.describe());
  const Shape batch = broadcast_shapes(batch_of(a), batch_of(b), "matmul");
  OpScope scope("matmul", {a, b});
  Tensor c = gemm_product(a, b, Tensor(), batch);
  return scope.finish(c, {a, b}, [](Node& n, const Tensor& dc) -> std::vector<Tensor> {
    const Tensor &a = n.saved[0], &b = n.saved[1];
    const Shape batch = batch_of(dc);
    Tensor da, db;
    // dA = dC B^T, summed over the batch dimensions A was broadcast along.
    if (n.needs_input_grad(0))
      da = sum_to(gemm_product(dc, transpose(b, -1, -2), Tensor(), batch), a.shape());
    // dB = A^T dC. A matrix B shared by the whole batch gets one GEMM over the batch's rows:
    // dB = A2^T dC2 with A2 = A as [batch*m, k], dC2 = dC as [batch*m, n].
    if (n.needs_input_grad(1) && b.dim() == 2)
      db = gemm_product(transpose(reshape(a, {-1, a.size(-1)}), 0, 1),
                        reshape(dc, {-1, dc.size(-1)}), Tensor(), {});
    else if (n.needs_input_grad(1))
      db = sum_to(gemm_product(transpose(a, -1, -2), dc, Tensor(), batch), b.shape());
    return {da, db};
  });
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias, CallSite site) {
  CallSiteScope at(site);
  check_operands("linear", x, w);
  const int64_t in = w.dim() == 2 ? w.size(1) : -1, out = w.dim() == 2 ? w.size(0) : -1;
  GLASS_CHECK(x.dim() >= 1 && w.dim() == 2 && x.size(-1) == in,
              "linear: input {} does not match weight {} (expects x [..., in], w [out, in])",
              x.describe(), w.describe());
  if (bias.defined())
    GLASS_CHECK(
        bias.shape() == Shape{out} && bias.dtype() == w.dtype() && bias.device() == w.device(),
        "linear: bias {} must be [{}] like weight {}", bias.describe(), out, w.describe());
  OpScope scope("linear", {x, w, bias});
  // y2 [N, out] = x2 [N, in] @ w^T (+ bias), x2 a view of x when its strides allow.
  const Tensor x2 = reshape(x.detach(), {-1, in});
  const Tensor b = bias.defined() ? contiguous(bias.detach()) : Tensor();
  const Tensor y2 = gemm_product(x2, transpose(w.detach(), 0, 1), b, {});
  Shape y_shape = x.shape();
  y_shape.back() = out;
  const Tensor y = y2.as_strided(y_shape, contiguous_strides(y_shape), y2.offset());
  return scope.finish(y, {x2, w}, [x_shape = x.shape()](Node& n, const Tensor& dy) {
    const Tensor &x2 = n.saved[0], &w = n.saved[1];
    const Tensor dy2 = contiguous(reshape(dy, {-1, w.size(0)}));
    std::vector<Tensor> grads(3);
    // dx = dy W: [N, out] @ [out, in], back in x's shape.
    if (n.needs_input_grad(0)) grads[0] = reshape(gemm_product(dy2, w, Tensor(), {}), x_shape);
    // dW = dy^T x: [out, N] @ [N, in], dy^T passed as a transpose flag.
    if (n.needs_input_grad(1)) grads[1] = gemm_product(transpose(dy2, 0, 1), x2, Tensor(), {});
    // db = dy summed over the rows.
    if (n.needs_input_grad(2)) {
      grads[2] = Tensor::empty({w.size(0)}, dy.dtype(), dy.device());
      kernels::backend(dy2).sum_dim(dy2, grads[2], 0);
    }
    return grads;
  });
}

}  // namespace glass
