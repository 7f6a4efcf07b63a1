// cpu GEMM with bf16 operands: the bf16 form of the `gemm` and `gemm_epilogue` entries, with the
// semantics of cuBLAS / cuBLASLt's bf16 GEMM under CUBLAS_COMPUTE_32F (what emu and cuda run):
//
//   pre  = alpha (op(A) op(B)) + beta C + bias     in f32: bf16 A, B, C and bias read exactly,
//                                                   the products summed in f32 (sgemm_bf16)
//   out  = pre, gelu(pre), or pre * gelu'(aux)     the epilogue, in f32
//   C    = bf16(out), aux = bf16(pre)              each rounded once, to nearest even
//   bias_grad = bf16(sum over i of out[i][j])      columns_of_c, from the f32 out
//             = bf16(sum over l of op(A)[i][l])    rows_of_a, summed in double from the bf16 A
//
// So the product is held in f32 until everything that reads it is done: rounding pre to bf16
// before GELU would round twice. Where beta is 0 (every GEMM of a training step), the GEMM's
// micro-kernel finishes each tile from its registers (Bf16Store, kernels/cpu/sgemm.h): the bias,
// the activation (GELU writing aux = bf16(pre) and C = bf16(gelu(pre)); dGELU reading the bf16 aux
// as it is) with the cpu's f32 GELU kernels' math, and the rounding of C. No f32 matrix is written,
// and there is no pass of its own over the activations, except for dGELU's bias gradient: the
// tiles then also keep the f32 result, and sum_dim sums its columns (one launch, as the f32
// path's). With beta != 0 the GEMM writes pre into an f32 matrix; the epilogue is the f32 passes
// the f32 cpu epilogue runs (gelu_forward, gelu_backward, sum_dim as visible launches), on that
// matrix; then one pass rounds each result into its bf16 tensor.
#include <vector>

#include "kernels/costs/elementwise.h"  // kGeluForwardFlops, kGeluBackwardFlops
#include "kernels/costs/gemm.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// dst[i] = bf16(src[i]) for n values, in parallel when worth it.
void round_into(const float* src, bf16* dst, int64_t rows, int64_t cols, int64_t src_ld,
                int64_t dst_ld) {
  for_each_row(rows, rows * cols, [&](int64_t r) {
    for (int64_t j = 0; j < cols; ++j) dst[r * dst_ld + j] = bf16::from_float(src[r * src_ld + j]);
  });
}

// pre (batch x m x n, row stride n) = alpha op(A) op(B) + beta C + bias, in f32, and the row sums
// of op(A) into row_sums (f32, m) when it is not null. With `finish` (beta 0 only), the tiles end
// the product as Bf16Store says: C = bf16(pre) or an activation's result (batch 1), and pre is
// scratch, touched only between k slabs (or kept, with keep_f32). Else one pass over pre adds
// beta C and the bias (and with round_into_c rounds C = bf16(pre)).
void product_in_f32(const GemmArgs& g, float* pre, float* row_sums, bool round_into_c,
                    Bf16Store finish = {}) {
  const bf16* a = g.a.data<bf16>();
  const bf16* b = g.b.data<bf16>();
  const bf16* c = g.c.data<bf16>();
  const bf16* bias = g.bias.defined() ? g.bias.data<bf16>() : nullptr;
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  bf16* c_out = g.c.data<bf16>();
  if (beta == 0.0f) {
    std::vector<float> wide_bias(bias ? static_cast<size_t>(g.n) : 0);
    for (size_t j = 0; j < wide_bias.size(); ++j) wide_bias[j] = bias[j].to_float();
    if (bias) finish.bias = wide_bias.data();
    if (finish.activation == GemmActivation::none && round_into_c) finish.ld = g.ldc;
    for (int64_t i = 0; i < g.batch; ++i) {
      if (finish.activation == GemmActivation::none && round_into_c)
        finish.rounded = c_out + i * g.stride_c;
      sgemm_bf16(g.trans_a, g.trans_b, g.m, g.n, g.k, alpha, a + i * g.stride_a, g.lda,
                 b + i * g.stride_b, g.ldb, 0.0f, pre + i * g.m * g.n, g.n,
                 {.a_row_sums = row_sums}, finish);
    }
    return;
  }
  for (int64_t i = 0; i < g.batch; ++i)
    sgemm_bf16(g.trans_a, g.trans_b, g.m, g.n, g.k, alpha, a + i * g.stride_a, g.lda,
               b + i * g.stride_b, g.ldb, 0.0f, pre + i * g.m * g.n, g.n, {.a_row_sums = row_sums});
  // cuBLASLt's order: (alpha acc + beta C) + bias
  const int64_t rows = g.batch * g.m;
  for_each_row(rows, rows * g.n, [&](int64_t r) {
    float* out = pre + r * g.n;
    const int64_t c_at = (r / g.m) * g.stride_c + (r % g.m) * g.ldc;
    for (int64_t j = 0; j < g.n; ++j) {
      float v = out[j];
      if (beta != 0.0f) v += beta * c[c_at + j].to_float();
      if (bias) v += bias[j].to_float();
      if (round_into_c)
        c_out[c_at + j] = bf16::from_float(v);
      else
        out[j] = v;
    }
  });
}

}  // namespace

void gemm_bf16(const GemmArgs& g, const GemmEpilogue& e) {
  if (g.m == 0 || g.n == 0) return;
  const bool row_sums = e.bias_grad_of == GemmBiasGrad::rows_of_a;
  const bool column_sums = e.bias_grad_of == GemmBiasGrad::columns_of_c;
  const bool activation = e.activation != GemmActivation::none;
  // beta 0: the tiles finish the product (the activation included), only C's column sums remain
  const bool in_tiles = g.beta == 0.0;
  const bool passes = !in_tiles && (activation || column_sums);
  const Tensor pre = Tensor::empty({g.batch * g.m * g.n}, DType::f32, g.c.device());
  const Tensor sums = row_sums ? Tensor::empty({g.m}, DType::f32, g.c.device()) : Tensor();
  Bf16Store finish;
  if (in_tiles && activation)
    finish = {.rounded = g.c.data<bf16>(),
              .ld = g.ldc,
              .keep_f32 = column_sums,
              .activation = e.activation,
              .aux = e.aux.data<bf16>(),
              .aux_ld = e.aux_ld};
  // 1. the product (one launch, named as the f32 GEMM's): pre in f32, or C (and aux) finished by
  // the tiles when no pass reads pre
  const char* kernel = row_sums ? "gemm_bgrad_a" : "gemm";
  const GemmElements el = gemm_elements(g);
  const double es = static_cast<double>(dtype_size(DType::bf16));
  const double mn = static_cast<double>(g.m * g.n);
  const double activation_flops =
      !in_tiles ? 0
      : e.activation == GemmActivation::gelu
          ? kGeluForwardFlops * mn
          : (e.activation == GemmActivation::gelu_backward ? kGeluBackwardFlops * mn : 0);
  const double flops =
      gemm_flops(g) + (row_sums ? static_cast<double>(g.m) * g.k : 0) + activation_flops;
  const double bytes = es * (el.a + el.b + el.c + el.bias + (row_sums ? g.m : 0) +
                             (in_tiles && activation ? mn : 0)) +
                       (in_tiles && column_sums ? 4 * mn : 0);
  launch(cpu_launch_info(kernel, g.batch, flops, bytes), [&] {
    product_in_f32(g, pre.data<float>(), row_sums ? sums.data<float>() : nullptr, !passes, finish);
    if (row_sums) round_into(sums.data<float>(), e.bias_grad.data<bf16>(), 1, g.m, 0, 0);
  });
  const Tensor pre_matrix = pre.as_strided({g.m, g.n}, {g.n, 1}, pre.offset());
  const Tensor column_sums_f32 =
      column_sums ? Tensor::empty({g.n}, DType::f32, g.c.device()) : Tensor();
  Tensor aux_f32;  // aux's f32 stand-in for the passes
  if (in_tiles) {
    if (!column_sums) return;
    // 2. dGELU's bias gradient: the column sums of the f32 result the tiles kept
    sum_dim(pre_matrix, column_sums_f32, 0);
  } else {
    if (!passes) return;
    // 2. the epilogue on the f32 pre: the cpu's own f32 passes, with f32 stand-ins for aux (widened
    // from bf16 when it is gelu_backward's input) and the bias gradient
    GemmArgs g32 = g;
    g32.c = pre;
    GemmEpilogue e32 = e;
    if (e.aux.defined()) {
      aux_f32 = e32.aux = Tensor::empty({g.m * e.aux_ld}, DType::f32, g.c.device());
      if (e.activation == GemmActivation::gelu_backward) {
        const bf16* aux = e.aux.data<bf16>();
        float* wide = aux_f32.data<float>();
        for_each_row(g.m, g.m * g.n, [&](int64_t r) {
          for (int64_t j = 0; j < g.n; ++j)
            wide[r * e.aux_ld + j] = aux[r * e.aux_ld + j].to_float();
        });
      }
    }
    e32.bias_grad = column_sums_f32;
    gemm_epilogue_passes(g32, e32);
  }
  // 3. the one rounding of each result to bf16
  const bool round_c = !in_tiles, round_aux = !in_tiles && e.activation == GemmActivation::gelu;
  const double rounded = (round_c ? mn : 0) * (round_aux ? 2 : 1) + (column_sums ? g.n : 0);
  launch(cpu_launch_info("gemm_epilogue_to_bf16", g.m, rounded, 6 * rounded), [&] {
    if (round_c) round_into(pre.data<float>(), g.c.data<bf16>(), g.m, g.n, g.n, g.ldc);
    if (round_aux)
      round_into(aux_f32.data<float>(), e.aux.data<bf16>(), g.m, g.n, e.aux_ld, e.aux_ld);
    if (column_sums)
      round_into(column_sums_f32.data<float>(), e.bias_grad.data<bf16>(), 1, g.n, 0, 0);
  });
}

}  // namespace glass::kernels::cpu
