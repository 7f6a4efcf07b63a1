// Differentiable matrix products: matmul (batched, broadcasting batch dimensions), linear, and
// mlp (linear, GELU, linear as one op, with the bias and GELU fused into the GEMMs).
//
// Every product goes to one strided-batched GEMM. An operand whose last two dimensions are
// row-major is passed as it is; one that is a transposed view (column-major) is passed with the
// GEMM's transpose flag; only other layouts are copied. The batch must step by a single stride
// (0 for a broadcast operand). So backward's dA = dC B^T and dB = A^T dC are GEMMs on transposed
// views, never physical transposes. A row-major A against a broadcast B folds its batch into
// the rows: [B, T, k] @ [k, n] is one [B*T, k] @ [k, n] GEMM.
#include <optional>
#include <tuple>

#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "engine/device_runtime.h"
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
// into a fresh contiguous [batch..., m, n]; with `epilogue`, one GEMM with that epilogue fused
// in (2-D operands only: kernels/backend.h, GemmEpilogue).
Tensor gemm_product(const Tensor& a, const Tensor& b, const Tensor& bias, const Shape& batch,
                    const kernels::GemmEpilogue* epilogue = nullptr) {
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
  if (epilogue != nullptr)
    kernels::backend(c).gemm_epilogue(g, *epilogue);
  else
    kernels::backend(c).gemm(g);
  return c;
}

constexpr auto RowsOfA = kernels::GemmBiasGrad::rows_of_a;

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
  // dA = dC B^T, dB = A^T dC (summed over broadcast batch dims)
  return scope.finish(std::move(c), {a, b}, [](Node& n, const Tensor& dc) -> InputGrads {
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
  Tensor y = y2.as_strided(y_shape, contiguous_strides(y_shape), y2.offset());
  // dx = dy W, dW = dy^T x, db = sum over rows of dy
  return scope.finish(std::move(y), {x2, w}, [x_shape = x.shape()](Node& n, const Tensor& dy) {
    const Tensor &x2 = n.saved[0], &w = n.saved[1];
    const Tensor dy2 = contiguous(reshape(dy, {-1, w.size(0)}));
    InputGrads grads(3);
    // dx = dy W: [N, out] @ [out, in], back in x's shape.
    if (n.needs_input_grad(0)) grads[0] = reshape(gemm_product(dy2, w, Tensor(), {}), x_shape);
    // dW = dy^T x: [out, N] @ [N, in], dy^T passed as a transpose flag. db = dy summed over the
    // rows = the row sums of dy^T: the same GEMM computes it (a bias-gradient epilogue).
    if (n.needs_input_grad(2)) grads[2] = Tensor::empty({w.size(0)}, dy.dtype(), dy.device());
    if (n.needs_input_grad(1)) {
      kernels::GemmEpilogue db;
      if (n.needs_input_grad(2)) db = {.bias_grad_of = RowsOfA, .bias_grad = grads[2]};
      grads[1] = gemm_product(transpose(dy2, 0, 1), x2, Tensor(), {},
                              n.needs_input_grad(2) ? &db : nullptr);
    } else if (n.needs_input_grad(2)) {
      kernels::backend(dy2).sum_dim(dy2, grads[2], 0);
    }
    return grads;
  });
}

// y = gelu(x W_fc^T + b_fc) W_proj^T + b_proj, two GEMMs with everything else fused in:
//   forward   pre = x W_fc^T + b_fc kept (aux), h = gelu(pre)     one GEMM, GELU_AUX_BIAS
//             y = h W_proj^T + b_proj                             one GEMM, BIAS
//   backward  dW_proj = dy^T h, db_proj = rows of dy^T summed      one GEMM, BGRAD
//             dpre = (dy W_proj) * gelu'(pre), db_fc = its column sums   one GEMM, DGELU_BGRAD
//             dW_fc = dpre^T x;  dx = dpre W_fc                    two GEMMs
// The GELU's gradient needs the GEMM that produces dh, which belongs to the second linear: that
// is why the fused op is the whole MLP and not a linear+GELU alone.
// recompute_gelu (train_gpt --recompute gelu): the GELU's output h is not saved; backward rebuilds
// it from what was saved with the kernel that made it in forward: on cpu in f32 gelu_forward on the
// saved GELU input pre (cpu's f32 epilogue is that pass), elsewhere the first GEMM again with its
// GELU epilogue, writing a scratch pre: in bf16 (cpu's, like cuBLASLt's on emu and cuda) the GELU
// reads the unrounded f32 sum, which a GELU kernel on the stored bf16 pre does not reproduce. The
// same bits either way.
namespace {
Tensor rebuild_gelu_output(const Tensor& x2, const Tensor& w_fc_t, const Tensor& b_fc,
                           const Tensor& pre) {
  const int64_t rows = pre.size(0), hidden = w_fc_t.size(1), aux_ld = pre.size(1);
  const LaunchContext& ctx = current_launch_context();
  LaunchScope scope(ctx.op, ctx.node_id, Phase::recompute, ctx.created_at);
  if (!capabilities(pre.device()).cuda_kernels && pre.dtype() != DType::bf16) {
    const kernels::Backend& be = kernels::backend(pre);
    // pre's rows are padded to aux_ld only when 4C is not a multiple of 8: then a contiguous copy.
    Tensor in = pre.as_strided({rows, hidden}, {aux_ld, 1}, pre.offset());
    if (aux_ld != hidden) {
      in = Tensor::empty({rows, hidden}, pre.dtype(), pre.device());
      be.copy(pre.as_strided({rows, hidden}, {aux_ld, 1}, pre.offset()), in);
    }
    Tensor h = Tensor::empty({rows, hidden}, pre.dtype(), pre.device());
    be.gelu_forward(in, h);
    return h;
  }
  const Tensor scratch = Tensor::empty(pre.shape(), pre.dtype(), pre.device());
  const kernels::GemmEpilogue gelu_aux{
      .activation = kernels::GemmActivation::gelu, .aux = scratch, .aux_ld = aux_ld};
  return gemm_product(x2, w_fc_t, b_fc, {}, &gelu_aux);
}
}  // namespace

Tensor mlp(const Tensor& x, const Tensor& w_fc, const Tensor& b_fc, const Tensor& w_proj,
           const Tensor& b_proj, bool recompute_gelu, CallSite site) {
  CallSiteScope at(site);
  check_operands("mlp", x, w_fc);
  check_operands("mlp", x, w_proj);
  GLASS_CHECK(x.dim() >= 1 && w_fc.dim() == 2 && w_proj.dim() == 2 && x.size(-1) == w_fc.size(1) &&
                  w_proj.size(1) == w_fc.size(0),
              "mlp: input {}, w_fc {} and w_proj {} do not chain (expects x [..., in], w_fc "
              "[hidden, in], w_proj [out, hidden])",
              x.describe(), w_fc.describe(), w_proj.describe());
  const int64_t in = w_fc.size(1), hidden = w_fc.size(0), out = w_proj.size(0);
  for (const auto& [bias, len, name] :
       {std::tuple{&b_fc, hidden, "b_fc"}, std::tuple{&b_proj, out, "b_proj"}})
    GLASS_CHECK(!bias->defined() || (bias->shape() == Shape{len} && bias->dtype() == x.dtype() &&
                                     bias->device() == x.device()),
                "mlp: {} {} must be [{}] of x's dtype and device ({})", name, bias->describe(), len,
                x.describe());
  OpScope scope("mlp", {x, w_fc, b_fc, w_proj, b_proj});
  const Tensor x2 = reshape(x.detach(), {-1, in});
  const int64_t rows = x2.size(0), aux_ld = kernels::gemm_aux_ld(hidden);
  // pre (the GELU's input) with rows padded to aux_ld, as cuBLASLt stores it.
  const Tensor pre = Tensor::empty({rows, aux_ld}, x.dtype(), x.device());
  const kernels::GemmEpilogue gelu_aux{
      .activation = kernels::GemmActivation::gelu, .aux = pre, .aux_ld = aux_ld};
  const auto detached = [](const Tensor& t) { return t.defined() ? contiguous(t.detach()) : t; };
  const Tensor b_fc_in = detached(b_fc);
  const Tensor h = gemm_product(x2, transpose(w_fc.detach(), 0, 1), b_fc_in, {}, &gelu_aux);
  const Tensor y2 = gemm_product(h, transpose(w_proj.detach(), 0, 1), detached(b_proj), {});
  Shape y_shape = x.shape();
  y_shape.back() = out;
  const Tensor y = y2.as_strided(y_shape, contiguous_strides(y_shape), y2.offset());
  return scope.finish(
      y,
      {x2, w_fc, pre, recompute_gelu ? Tensor() : h, w_proj, recompute_gelu ? b_fc_in : Tensor()},
      [x_shape = x.shape()](Node& n, const Tensor& dy) {
        const Tensor &x2 = n.saved[0], &w_fc = n.saved[1], &pre = n.saved[2], &w_proj = n.saved[4];
        const Tensor h = n.saved[3].defined()
                             ? n.saved[3]
                             : rebuild_gelu_output(x2, transpose(w_fc, 0, 1), n.saved[5], pre);
        const Tensor dy2 = contiguous(reshape(dy, {-1, w_proj.size(0)}));
        InputGrads grads(5);
        const auto new_vector = [&](int64_t len) {
          return Tensor::empty({len}, dy.dtype(), dy.device());
        };
        // Through the second linear: dW_proj = dy^T h, db_proj in the same GEMM.
        if (n.needs_input_grad(4)) grads[4] = new_vector(w_proj.size(0));
        if (n.needs_input_grad(3)) {
          kernels::GemmEpilogue db;
          if (n.needs_input_grad(4)) db = {.bias_grad_of = RowsOfA, .bias_grad = grads[4]};
          grads[3] = gemm_product(transpose(dy2, 0, 1), h, Tensor(), {},
                                  n.needs_input_grad(4) ? &db : nullptr);
        } else if (n.needs_input_grad(4)) {
          kernels::backend(dy2).sum_dim(dy2, grads[4], 0);
        }
        if (!n.needs_input_grad(0) && !n.needs_input_grad(1) && !n.needs_input_grad(2))
          return grads;
        // Through the GELU: dpre = (dy W_proj) * gelu'(pre), and db_fc = dpre summed over the rows,
        // all in the GEMM that computes dy W_proj.
        kernels::GemmEpilogue dgelu{.activation = kernels::GemmActivation::gelu_backward,
                                    .aux = pre,
                                    .aux_ld = pre.size(1)};
        if (n.needs_input_grad(2)) {
          grads[2] = new_vector(w_fc.size(0));
          dgelu.bias_grad_of = kernels::GemmBiasGrad::columns_of_c;
          dgelu.bias_grad = grads[2];
        }
        const Tensor dpre = gemm_product(dy2, w_proj, Tensor(), {}, &dgelu);
        // Through the first linear: dW_fc = dpre^T x, dx = dpre W_fc.
        if (n.needs_input_grad(1)) grads[1] = gemm_product(transpose(dpre, 0, 1), x2, Tensor(), {});
        if (n.needs_input_grad(0))
          grads[0] = reshape(gemm_product(dpre, w_fc, Tensor(), {}), x_shape);
        return grads;
      });
}

}  // namespace glass
