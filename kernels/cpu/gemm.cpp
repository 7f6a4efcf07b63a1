// cpu GEMM: row-major, strided-batched C = alpha op(A) op(B) (+ bias) + beta C (f32: glass's own
// sgemm, kernels/cpu/sgemm.cpp; bf16: kernels/cpu/gemm_bf16.cpp; f64: OpenBLAS).
//
// Transposes are GEMM flags, never copies. f32 adds the bias as the GEMM writes C; f64 prefills
// every row of C with it (plus beta C) and lets OpenBLAS accumulate onto that (beta = 1).
// Before anything runs, the leading dimensions and batch strides are checked against the storage
// each operand lives in, so a wrong ld is an error naming it, not a read past an allocation.
#include <climits>
#include <type_traits>
#include <vector>

#include "kernels/costs/gemm.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// One operand as stored: `rows` x `cols` with row stride `ld`, `batch` matrices `stride` apart.
// Checks ld against the row length and the furthest element against the tensor's storage.
void check_operand(const char* name, const char* ld_name, const Tensor& t, int64_t rows,
                   int64_t cols, int64_t ld, int64_t stride, int64_t batch) {
  GLASS_CHECK(t.defined(), "gemm: operand {} is undefined", name);
  GLASS_CHECK(ld >= std::max<int64_t>(1, cols) && ld <= INT_MAX,
              "gemm: {} = {} must be at least the stored row length {} of {} ({} stored {} x {})",
              ld_name, ld, std::max<int64_t>(1, cols), name, t.describe(), rows, cols);
  GLASS_CHECK(stride >= 0, "gemm: batch stride {} of {} is negative", stride, name);
  if (rows == 0 || cols == 0) return;
  const int64_t last = t.offset() + (batch - 1) * stride + (rows - 1) * ld + cols - 1;
  const int64_t capacity = static_cast<int64_t>(t.storage()->nbytes / dtype_size(t.dtype()));
  GLASS_CHECK(last < capacity,
              "gemm: {} ({} x {}, {} = {}, batch {} with stride {}) reaches element {} beyond "
              "its storage of {} elements ({})",
              name, rows, cols, ld_name, ld, batch, stride, last, capacity, t.describe());
}

}  // namespace

void check_gemm_args(const GemmArgs& g) {
  GLASS_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1 && g.m <= INT_MAX &&
                  g.n <= INT_MAX && g.k <= INT_MAX,
              "gemm: bad sizes m={} n={} k={} batch={}", g.m, g.n, g.k, g.batch);
  GLASS_CHECK(g.a.defined() && g.b.defined() && g.c.defined() && g.a.dtype() == g.c.dtype() &&
                  g.b.dtype() == g.c.dtype() &&
                  (!g.bias.defined() || g.bias.dtype() == g.c.dtype()),
              "gemm: A {}, B {}, C {} and bias {} must share one dtype", g.a.describe(),
              g.b.describe(), g.c.describe(), g.bias.describe());
  // A is stored m x k, or k x m when transposed; B is k x n, or n x k.
  check_operand("A", "lda", g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a,
                g.batch);
  check_operand("B", "ldb", g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b,
                g.batch);
  check_operand("C", "ldc", g.c, g.m, g.n, g.ldc, g.stride_c, g.batch);
  GLASS_CHECK(g.batch == 1 || g.m == 0 || g.stride_c >= g.m * g.ldc,
              "gemm: C's batch stride {} makes the {} outputs of {} x {} (ldc {}) overlap",
              g.stride_c, g.batch, g.m, g.n, g.ldc);
  if (g.bias.defined())
    GLASS_CHECK(g.bias.is_contiguous() && g.bias.numel() == g.n,
                "gemm: bias {} must be contiguous with n = {} values", g.bias.describe(), g.n);
}

namespace {

// C[i] = beta C[i] + bias (broadcast over rows; no bias reads as 0), for every batch entry.
// With beta == 0 the old C is not read, so uninitialised memory never leaks in as NaN.
template <class T>
void prefill(const GemmArgs& g, T* c, const T* bias) {
  const T beta = static_cast<T>(g.beta);
  const int64_t rows = g.batch * g.m, n = g.n;
  for_each_row(rows, rows * n, [&](int64_t r) {
    T* row = c + (r / g.m) * g.stride_c + (r % g.m) * g.ldc;
    if (beta == T(0))
      for (int64_t j = 0; j < n; ++j) row[j] = bias[j];
    else
      for (int64_t j = 0; j < n; ++j) row[j] = beta * row[j] + bias[j];
  });
}

// The sums over k of op(A)'s rows, for the f64 GEMM (the f32 one takes them as it packs A).
template <class T>
void sum_rows_of_a(const GemmArgs& g, T* sums) {
  const T* a = g.a.data<T>();
  for (int64_t i = 0; i < g.m; ++i) {
    double s = 0;
    for (int64_t p = 0; p < g.k; ++p)
      s += static_cast<double>(g.trans_a ? a[p * g.lda + i] : a[i * g.lda + p]);
    sums[i] = static_cast<T>(s);
  }
}

template <class T>
void gemm_typed(const GemmArgs& g, T* a_row_sums) {
  const T* a = g.a.data<T>();
  const T* b = g.b.data<T>();
  T* c = g.c.data<T>();
  // The GEMM threads each call internally, so the batch runs one matrix after another.
  if constexpr (std::is_same_v<T, float>) {  // glass's sgemm adds the bias as it writes C
    const float* bias = g.bias.defined() ? g.bias.data<float>() : nullptr;
    for (int64_t i = 0; i < g.batch; ++i)
      sgemm(g.trans_a, g.trans_b, g.m, g.n, g.k, static_cast<float>(g.alpha), a + i * g.stride_a,
            g.lda, b + i * g.stride_b, g.ldb, static_cast<float>(g.beta), c + i * g.stride_c, g.ldc,
            {.bias = bias, .a_row_sums = a_row_sums});
    return;
  }
  // f64 through OpenBLAS: a bias, or an empty inner dimension (nothing for the GEMM to add), is
  // handled by the prefill.
  if (a_row_sums) sum_rows_of_a(g, a_row_sums);
  const bool prefilled = g.bias.defined() || g.k == 0;
  if (prefilled) {
    const std::vector<T> zeros(g.bias.defined() ? 0 : static_cast<size_t>(g.n), T(0));
    prefill(g, c, g.bias.defined() ? g.bias.data<T>() : zeros.data());
  }
  if (g.k == 0) return;
  const T beta = prefilled ? T(1) : static_cast<T>(g.beta);
  for (int64_t i = 0; i < g.batch; ++i)
    blas_gemm(g.trans_a, g.trans_b, g.m, g.n, g.k, static_cast<T>(g.alpha), a + i * g.stride_a,
              g.lda, b + i * g.stride_b, g.ldb, beta, c + i * g.stride_c, g.ldc);
}

// One launch named `kernel`: the GEMM, and op(A)'s row sums into a_row_sums when it is defined.
// Bytes: each distinct input matrix once (a batch stride of 0 reuses one), C written (and read
// when beta != 0), the bias once, the sums written; FLOPs: the product's, plus one add per
// element of A summed.
void gemm_launch(const GemmArgs& g, const Tensor& a_row_sums, const char* kernel) {
  check_gemm_args(g);
  if (g.m == 0 || g.n == 0) return;
  const bool sums = a_row_sums.defined();
  GLASS_CHECK(!sums || (g.batch == 1 && a_row_sums.is_contiguous() && a_row_sums.numel() == g.m &&
                        a_row_sums.dtype() == g.c.dtype()),
              "{}: the row sums {} of A must be m = {} contiguous values of C's dtype, batch 1",
              kernel, a_row_sums.describe(), g.m);
  if (g.c.dtype() == DType::bf16)  // gemm_bf16.cpp: the product in f32, rounded once
    return gemm_bf16(
        g, sums ? GemmEpilogue{.bias_grad_of = GemmBiasGrad::rows_of_a, .bias_grad = a_row_sums}
                : GemmEpilogue{});
  const double es = static_cast<double>(dtype_size(g.c.dtype()));
  const GemmElements e = gemm_elements(g);
  const double sum_elems = sums ? static_cast<double>(g.m) : 0;
  const double flops = gemm_flops(g) + (sums ? static_cast<double>(g.m) * g.k : 0);
  launch(cpu_launch_info(kernel, g.batch, flops, es * (e.a + e.b + e.c + e.bias + sum_elems)), [&] {
    visit_float(g.c, kernel,
                [&]<class T>() { gemm_typed<T>(g, sums ? a_row_sums.data<T>() : nullptr); });
  });
}

}  // namespace

void gemm(const GemmArgs& g) { gemm_launch(g, Tensor(), "gemm"); }

void gemm_with_row_sums_of_a(const GemmArgs& g, const Tensor& a_row_sums) {
  gemm_launch(g, a_row_sums, "gemm_bgrad_a");
}

}  // namespace glass::kernels::cpu
