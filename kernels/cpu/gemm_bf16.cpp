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
// before GELU would round twice. Without an epilogue pass (and with beta = 0: every GEMM of a
// training step), the GEMM's micro-kernel adds the bias and rounds C from its registers
// (Bf16Store, kernels/cpu/sgemm.h): no f32 matrix is written. With one, the GEMM writes pre (the
// bias added) into an f32 matrix; the epilogue is the same f32 passes the f32 cpu epilogue runs
// (gelu_forward, gelu_backward, sum_dim as visible launches), on that matrix; then one pass rounds
// the result and the bias gradient into their bf16 tensors. Three shortcuts read or write bf16
// directly, with the same bits as those passes give:
// - the GELU GEMM (the MLP's forward) rounds aux = bf16(pre) and C = bf16(gelu(pre)) in its
//   tiles, from the registers (Bf16Store::gelu): no f32 matrix, no GELU pass (`gemm_gelu_aux`);
// - dGELU's gelu'(aux) reads the bf16 aux as it is (gelu_backward_of_bf16) where its rows are
//   unpadded;
// - dGELU with the bias gradient of C's columns (the MLP's backward) is one pass that also sums
//   the columns and rounds both results (gelu_backward_column_sums_bf16): the f32 result is never
//   written. (Doing that pass in the GEMM's tiles too was measured 1-4% slower per step: its tiles
//   would read aux from memory; bench/RESULTS.md, 2026-12-06.)
#include <vector>

#include "kernels/costs/elementwise.h"  // kGeluForwardFlops
#include "kernels/costs/gemm.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// The most f32 values of pre kept in a thread's scratch (256 KB): a product of a few rows, as
// decoding makes; a larger pre is a tensor of the step, counted by the allocator like any other.
constexpr int64_t kKeptScratchFloats = int64_t{1} << 16;

// dst[i] = bf16(src[i]) for n values, in parallel when worth it.
void round_into(const float* src, bf16* dst, int64_t rows, int64_t cols, int64_t src_ld,
                int64_t dst_ld) {
  for_each_row(rows, rows * cols,
               [&](int64_t r) { round_row_to_bf16(src + r * src_ld, dst + r * dst_ld, cols); });
}

// pre (batch x m x n, row stride n) = alpha op(A) op(B) + beta C + bias, in f32, and the row sums
// of op(A) into row_sums (f32, m) when it is not null. With round_into_c, C = bf16(pre) instead.
// Where beta is 0 (every GEMM of a training step), sgemm_bf16 adds the bias and rounds as it
// leaves each tile (Bf16Store: with round_into_c, pre is scratch, touched only between k slabs);
// else one pass over pre adds beta C and the bias and rounds. With aux (beta 0, batch 1: a GELU
// GEMM), the tiles also round pre into aux (row stride aux_ld), and then either write C =
// bf16(gelu(pre)) themselves (gelu_into_c) or keep pre in f32 for the passes.
void product_in_f32(const GemmArgs& g, float* pre, float* row_sums, bool round_into_c,
                    bf16* aux = nullptr, int64_t aux_ld = 0, bool gelu_into_c = false) {
  const bf16* a = g.a.data<bf16>();
  const bf16* b = g.b.data<bf16>();
  const bf16* c = g.c.data<bf16>();
  const bf16* bias = g.bias.defined() ? g.bias.data<bf16>() : nullptr;
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  bf16* c_out = g.c.data<bf16>();
  if (beta == 0.0f) {
    thread_local std::vector<float> wide_bias;  // kept: no allocation per product
    wide_bias.resize(bias ? static_cast<size_t>(g.n) : 0);
    for (size_t j = 0; j < wide_bias.size(); ++j) wide_bias[j] = bias[j].to_float();
    for (int64_t i = 0; i < g.batch; ++i)
      sgemm_bf16(g.trans_a, g.trans_b, g.m, g.n, g.k, alpha, a + i * g.stride_a, g.lda,
                 b + i * g.stride_b, g.ldb, 0.0f, pre + i * g.m * g.n, g.n,
                 {.a_row_sums = row_sums},
                 {.rounded = aux            ? aux
                             : round_into_c ? c_out + i * g.stride_c
                                            : nullptr,
                  .ld = aux ? aux_ld : g.ldc,
                  .bias = bias ? wide_bias.data() : nullptr,
                  .keep_f32 = aux != nullptr && !gelu_into_c,
                  .gelu = gelu_into_c ? c_out : nullptr,
                  .gelu_ld = g.ldc});
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
  const bool passes =
      e.activation != GemmActivation::none || e.bias_grad_of == GemmBiasGrad::columns_of_c;
  const bool aux_from_tiles = e.activation == GemmActivation::gelu && g.beta == 0.0;
  const bool gelu_into_c = aux_from_tiles && e.bias_grad_of != GemmBiasGrad::columns_of_c;
  // pre, in f32: a tensor where the epilogue's passes read it; else scratch, this thread's own
  // buffer for a small product (decoding a token: no request to the allocator per product)
  const int64_t pre_floats = g.batch * g.m * g.n;
  const bool pre_is_scratch = (!passes || gelu_into_c) && pre_floats <= kKeptScratchFloats;
  const Tensor pre_tensor =
      pre_is_scratch ? Tensor() : Tensor::empty({pre_floats}, DType::f32, g.c.device());
  thread_local std::vector<float> scratch;
  if (pre_is_scratch && scratch.size() < static_cast<size_t>(pre_floats))
    scratch.resize(static_cast<size_t>(pre_floats));
  float* const pre = pre_is_scratch ? scratch.data() : pre_tensor.data<float>();
  const Tensor sums = row_sums ? Tensor::empty({g.m}, DType::f32, g.c.device()) : Tensor();
  // 1. the product (one launch, named as the f32 GEMM's unless it applies GELU): pre in f32; C
  // rounded here when no epilogue pass reads pre
  // GELU (beta 0): aux = bf16(pre) rounded by the product's tiles; without C's column sums the
  // tiles also write C = bf16(gelu(pre)) (one launch, `gemm_gelu_aux`, as cuBLASLt's epilogue),
  // else they keep pre in f32 for the passes
  const char* kernel = row_sums ? "gemm_bgrad_a" : gelu_into_c ? "gemm_gelu_aux" : "gemm";
  const GemmElements el = gemm_elements(g);
  const double es = static_cast<double>(dtype_size(DType::bf16));
  const double mn = static_cast<double>(g.m) * static_cast<double>(g.n);
  const double flops = gemm_flops(g) + (row_sums ? static_cast<double>(g.m) * g.k : 0) +
                       (gelu_into_c ? mn * kGeluForwardFlops : 0);
  launch(cpu_launch_info(
             kernel, g.batch, flops,
             es * (el.a + el.b + el.c + el.bias + (row_sums ? g.m : 0) + (gelu_into_c ? mn : 0)),
             product_unit<bf16>()),
         [&] {
           product_in_f32(g, pre, row_sums ? sums.data<float>() : nullptr, !passes,
                          aux_from_tiles ? e.aux.data<bf16>() : nullptr, e.aux_ld, gelu_into_c);
           if (row_sums) round_into(sums.data<float>(), e.bias_grad.data<bf16>(), 1, g.m, 0, 0);
         });
  if (!passes || gelu_into_c) return;
  // 2. the epilogue on the f32 pre: the cpu's own f32 passes, with f32 stand-ins for aux and the
  // bias gradient (aux widened from bf16 when it is gelu_backward's input)
  GemmArgs g32 = g;
  g32.c = pre_tensor;
  GemmEpilogue e32 = e;
  // dGELU with C's column sums (the MLP's backward): one pass for the passes below and the
  // rounding, pre read once (the same bits)
  if (e.activation == GemmActivation::gelu_backward && e.aux_ld == g.n &&
      e.bias_grad_of == GemmBiasGrad::columns_of_c) {
    gelu_backward_column_sums_bf16(pre, e.aux.data<bf16>(), g.m, g.n, g.c.data<bf16>(), g.ldc,
                                   e.bias_grad.data<bf16>());
    return;
  }
  if (aux_from_tiles) {  // C = gelu(pre) in place; the passes below only sum C's columns
    const Tensor pre_matrix = pre_tensor.as_strided({g.m, g.n}, {g.n, 1}, pre_tensor.offset());
    gelu_forward(pre_matrix, pre_matrix);
    e32.activation = GemmActivation::none;
    e32.aux = Tensor();
  } else if (e.activation == GemmActivation::gelu_backward && e.aux_ld == g.n) {
    // C = pre * gelu'(aux), reading the bf16 aux as it is (no f32 copy of it)
    const Tensor pre_rows = pre_tensor.as_strided({g.m * g.n}, {1}, pre_tensor.offset());
    gelu_backward_of_bf16(e.aux.as_strided({g.m * g.n}, {1}, e.aux.offset()), pre_rows, pre_rows);
    e32.activation = GemmActivation::none;
    e32.aux = Tensor();
  } else if (e.aux.defined()) {
    e32.aux = Tensor::empty({g.m * e.aux_ld}, DType::f32, g.c.device());
    if (e.activation == GemmActivation::gelu_backward) {
      const bf16* aux = e.aux.data<bf16>();
      float* wide = e32.aux.data<float>();
      for_each_row(g.m, g.m * g.n, [&](int64_t r) {
        for (int64_t j = 0; j < g.n; ++j) wide[r * e.aux_ld + j] = aux[r * e.aux_ld + j].to_float();
      });
    }
  }
  if (e.bias_grad_of == GemmBiasGrad::columns_of_c)
    e32.bias_grad = Tensor::empty({g.n}, DType::f32, g.c.device());
  gemm_epilogue_passes(g32, e32);
  // 3. the one rounding of each result to bf16
  const bool round_aux = e.activation == GemmActivation::gelu && !aux_from_tiles;
  const double rounded = mn * (round_aux ? 2 : 1);
  launch(cpu_launch_info("gemm_epilogue_to_bf16", g.m, rounded, 6 * rounded), [&] {
    round_into(pre, g.c.data<bf16>(), g.m, g.n, g.n, g.ldc);
    if (round_aux)
      round_into(e32.aux.data<float>(), e.aux.data<bf16>(), g.m, g.n, e.aux_ld, e.aux_ld);
    if (e.bias_grad_of == GemmBiasGrad::columns_of_c)
      round_into(e32.bias_grad.data<float>(), e.bias_grad.data<bf16>(), 1, g.n, 0, 0);
  });
}

}  // namespace glass::kernels::cpu
