// Every rung of the matmul ladder on emu against the cpu GEMM (OpenBLAS) over the whole GemmArgs
// contract: sizes that leave partial tiles (33x17x45, 65x31x70 against 16, 64 and 128 tiles,
// 1x1x1), transposes, padded leading dimensions, strided and broadcast batches, alpha, beta and a
// bias, and k = 0; random inputs; bit-identical results under shuffled thread order.
// The Tensor Core rung (4) multiplies bf16: its reference is the cpu GEMM of the same inputs
// rounded to bf16 (exact in f32), so only the order of the f32 sums differs and the tolerance stays
// that of f32. It also runs on bf16 operands (C rounded once to bf16), and a copy of it with a
// deliberately wrong fragment layout (A's 8-row halves swapped) must fail the same comparison.
#include "tests/ladder/ladder_test.h"

namespace glass {
namespace {

using kernels::GemmArgs;
using kernels::ladder::Op;
using kernels::ladder::Rung;
using kernels::ladder::rungs;
using testing::all_close;
using testing::on_device;
using testing::to_cpu;

constexpr int64_t kPad = 3;  // leading dimensions are the row length + kPad

struct GemmCase {
  const char* name;
  int64_t m, n, k, batch;
  bool trans_a, trans_b, shared_b, bias;
  double alpha, beta;
};

const GemmCase kCases[] = {
    {"33x17x45", 33, 17, 45, 1, false, false, false, false, 1, 0},
    {"1x1x1", 1, 1, 1, 1, false, false, false, false, 1, 0},
    {"65x31x70", 65, 31, 70, 1, false, false, false, false, 1, 0},
    {"A^T B^T, batch 3, alpha, beta, bias", 19, 70, 33, 3, true, true, false, true, 0.5, -1.5},
    {"A^T, B shared by the batch, bias", 66, 9, 17, 2, true, false, true, true, 1, 0},
    {"B^T, beta 1 (accumulate)", 5, 130, 20, 1, false, true, false, false, 1, 1},
    {"k = 0: C = beta C + bias", 5, 7, 0, 1, false, false, false, true, 1, 2},
};

// A case's operands on cpu (random, padded rows), and the GemmArgs over them.
struct GemmInputs {
  Tensor a, b, c, bias;
  GemmArgs args;

  GemmInputs(const GemmCase& g, Generator& gen) {
    // op(A) is m x k: stored m x k, or k x m when transposed; likewise op(B) k x n.
    const int64_t a_rows = g.trans_a ? g.k : g.m, a_cols = g.trans_a ? g.m : g.k;
    const int64_t b_rows = g.trans_b ? g.n : g.k, b_cols = g.trans_b ? g.k : g.n;
    a = randn({g.batch, a_rows, a_cols + kPad}, gen);
    b = randn({g.shared_b ? 1 : g.batch, b_rows, b_cols + kPad}, gen);
    c = randn({g.batch, g.m, g.n + kPad}, gen);  // beta != 0 reads it; padding must stay
    bias = g.bias ? randn({g.n}, gen) : Tensor();
    args.trans_a = g.trans_a;
    args.trans_b = g.trans_b;
    args.m = g.m;
    args.n = g.n;
    args.k = g.k;
    args.batch = g.batch;
    args.lda = a_cols + kPad;
    args.ldb = b_cols + kPad;
    args.ldc = g.n + kPad;
    args.stride_a = a_rows * args.lda;
    args.stride_b = g.shared_b ? 0 : b_rows * args.ldb;
    args.stride_c = g.m * args.ldc;
    args.alpha = g.alpha;
    args.beta = g.beta;
  }

  // The arguments over tensors produced by `place` (identity for cpu, on_device for emu).
  template <class Place>
  GemmArgs with(Place place) const {
    GemmArgs g = args;
    g.a = place(a);
    g.b = place(b);
    g.c = place(c);
    if (bias.defined()) g.bias = place(bias);
    return g;
  }
};

constexpr int kTensorCoreRung = 4;

// x rounded to bf16 and back (on cpu): the values the Tensor Core rung multiplies.
Tensor rounded_to_bf16(const Tensor& x) {
  const Tensor b = Tensor::empty(x.shape(), DType::bf16, kCPU), out = Tensor::empty(x.shape());
  kernels::backend(kCPU).cast(x, b);
  kernels::backend(kCPU).cast(b, out);
  return out;
}

// The cpu GEMM on copies of the case's tensors (C is overwritten); with `bf16_operands`, of A and
// B rounded to bf16.
Tensor cpu_result(const GemmInputs& in, bool bf16_operands = false) {
  GemmArgs g = in.with(testing::to_cpu);
  if (bf16_operands) {
    g.a = rounded_to_bf16(g.a);
    g.b = rounded_to_bf16(g.b);
  }
  kernels::cpu::gemm(g);
  return g.c;
}

TEST(MatmulLadder, EveryRungMatchesCpu) {
  Generator gen(11);
  for (const GemmCase& c : kCases) {
    const GemmInputs in(c, gen);
    const Tensor expected = cpu_result(in), expected_bf16 = cpu_result(in, true);
    for (const Rung& r : rungs(Op::matmul)) {
      SCOPED_TRACE(fmt::format("rung {} ({}), case {}", r.index, r.name, c.name));
      const bool tensor_core = r.index == kTensorCoreRung;
      const GemmArgs g = in.with(on_device);
      testing::LaunchLog log;
      kernels::ladder::run_gemm(r.index, g);
      // Every rung is one launch; the production rung sends a GEMM with a bias to cuBLASLt, whose
      // BIAS epilogue adds it inside the GEMM; the Tensor Core rung rounds f32 A and B to bf16
      // first (unless k = 0: then there is nothing to read).
      std::vector<std::string> launches = {r.production && c.bias ? "cublasLtMatmul_bias"
                                                                  : std::string(r.kernel)};
      if (tensor_core && c.k > 0)
        launches.insert(launches.begin(), 2, std::string("matmul_tensor_core_round_bf16"));
      EXPECT_EQ(log.kernels(), launches);
      EXPECT_TRUE(all_close(to_cpu(g.c), tensor_core ? expected_bf16 : expected, 1e-5,
                            tensor_core ? 1e-5 : 0));
    }
  }
}

// run_matmul: the plain C = A B of contiguous 2-D tensors.
TEST(MatmulLadder, PlainMatmulOfTensors) {
  Generator gen(12);
  const Tensor a = randn({33, 45}, gen), b = randn({45, 17}, gen);
  const Tensor expected = Tensor::empty({33, 17});
  GemmArgs g;
  g.a = a;
  g.b = b;
  g.c = expected;
  g.m = 33;
  g.k = 45;
  g.n = 17;
  g.lda = 45;
  g.ldb = g.ldc = 17;
  kernels::cpu::gemm(g);
  // the Tensor Core rung: against the product of the inputs rounded to bf16
  const Tensor expected_bf16 = Tensor::empty({33, 17});
  g.a = rounded_to_bf16(a);
  g.b = rounded_to_bf16(b);
  g.c = expected_bf16;
  kernels::cpu::gemm(g);
  for (const Rung& r : rungs(Op::matmul)) {
    SCOPED_TRACE(r.name);
    const Tensor c = testing::device_empty({33, 17});
    kernels::ladder::run_matmul(r.index, on_device(a), on_device(b), c);
    EXPECT_TRUE(all_close(to_cpu(c), r.index == kTensorCoreRung ? expected_bf16 : expected, 1e-5));
  }
  const std::string msg = testing::error_of([&] {
    kernels::ladder::run_matmul(0, on_device(a), on_device(a), testing::device_empty({33, 17}));
  });
  EXPECT_TRUE(testing::contains_all(msg, {"a [M, K], b [K, N]", "[33, 45]", "[33, 17]"}));
}

TEST(MatmulLadder, BitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(13);
  const GemmInputs in(kCases[3], gen);
  const GemmArgs g = in.with(on_device);
  for (int rung = 0; rung < kernels::ladder::rung_count(Op::matmul); ++rung) {
    SCOPED_TRACE(fmt::format("rung {}", rung));
    // beta != 0 reads C: start each run from the same C
    const Tensor c0 = on_device(in.c);
    testing::expect_deterministic({g.c}, [&] {
      kernels::cuda::copy(c0, g.c);
      kernels::ladder::run_gemm(rung, g);
    });
  }
}

// x (f32, cpu) as bf16, and back.
Tensor cast_to(const Tensor& x, DType dtype) {
  const Tensor out = Tensor::empty(x.shape(), dtype, kCPU);
  kernels::backend(kCPU).cast(x, out);
  return out;
}

// bf16 operands (mixed precision) go straight to the mma kernel, and C is bf16, rounded once at the
// store: against the f32 GEMM of the same bf16 values, within one bf16 rounding (2^-9 relative).
TEST(MatmulLadder, TensorCoreRungOnBf16Operands) {
  Generator gen(15);
  for (const GemmCase& c : kCases) {
    SCOPED_TRACE(c.name);
    GemmInputs in(c, gen);
    for (Tensor* t : {&in.a, &in.b, &in.c, &in.bias})
      if (t->defined()) *t = rounded_to_bf16(*t);
    const Tensor expected = cpu_result(in);
    const GemmArgs g = in.with([](const Tensor& x) { return on_device(cast_to(x, DType::bf16)); });
    testing::LaunchLog log;
    kernels::ladder::run_gemm(kTensorCoreRung, g);
    EXPECT_EQ(log.kernels(), std::vector<std::string>{"matmul_tensor_core_mma"});
    EXPECT_TRUE(all_close(cast_to(to_cpu(g.c), DType::f32), expected, 1.0 / 256, 1e-5));
  }
}

// bf16 operands whose rows are 16-byte aligned (K and N multiples of 8): every chunk inside the
// matrices goes by cp.async straight from the operands (the f32 path's rounded copies are aligned
// too, the padded cases above take the scalar path); M, N, K still leave partial tiles.
TEST(MatmulLadder, TensorCoreRungOnAlignedBf16Rows) {
  Generator gen(17);
  const Tensor a = rounded_to_bf16(randn({70, 72}, gen)),
               b = rounded_to_bf16(randn({72, 136}, gen));
  const Tensor expected = Tensor::empty({70, 136});
  GemmArgs g;
  g.a = a;
  g.b = b;
  g.c = expected;
  g.m = 70;
  g.k = 72;
  g.n = 136;
  g.lda = 72;
  g.ldb = g.ldc = 136;
  kernels::cpu::gemm(g);
  const Tensor c = testing::device_empty({70, 136}, DType::bf16);
  kernels::ladder::run_matmul(kTensorCoreRung, on_device(cast_to(a, DType::bf16)),
                              on_device(cast_to(b, DType::bf16)), c);
  EXPECT_TRUE(all_close(cast_to(to_cpu(c), DType::f32), expected, 1.0 / 256, 1e-5));
}

// The comparison catches a layout error: the same kernel with A's fragments addressed with the
// 8-row halves of each 16-row block swapped fails it (rows i and i ^ 8 of C trade places), while
// the right kernel passes.
TEST(MatmulLadder, TensorCoreComparisonCatchesSwappedRows) {
  Generator gen(16);
  const GemmInputs in(kCases[2], gen);  // 65 x 31 x 70: five 16-row blocks, the last partial
  const Tensor expected = cpu_result(in, true);
  const GemmArgs right = in.with(on_device), swapped = in.with(on_device);
  kernels::ladder::run_gemm(kTensorCoreRung, right);
  kernels::cuda::matmul_tensor_core_swapped_rows(swapped);
  EXPECT_TRUE(all_close(to_cpu(right.c), expected, 1e-5, 1e-5));
  EXPECT_FALSE(all_close(to_cpu(swapped.c), expected, 1e-5, 1e-5));
  // and the error is the swap: row i of the wrong C is row i ^ 8 of the right one
  const std::vector<double> good = testing::values(to_cpu(right.c)),
                            bad = testing::values(to_cpu(swapped.c));
  const int64_t ldc = right.ldc;
  for (int64_t i = 0; i < 64; ++i)
    for (int64_t j = 0; j < right.n; ++j)
      ASSERT_EQ(bad[i * ldc + j], good[(i ^ 8) * ldc + j]) << "row " << i << ", column " << j;
}

// The rungs refuse what gemm() and cuBLAS refuse: a leading dimension shorter than a row (cuBLAS's
// own check, named by the rung's kernel), an operand reaching past its storage (gemm()'s check).
TEST(MatmulLadder, BadArgumentsAreNamed) {
  Generator gen(14);
  for (const Rung& r : rungs(Op::matmul)) {
    SCOPED_TRACE(r.name);
    GemmInputs short_lda(kCases[0], gen);
    short_lda.args.lda = 2;  // A is 33 x 45
    short_lda.args.stride_a = 0;
    EXPECT_TRUE(testing::contains_all(
        testing::error_of([&] { kernels::ladder::run_gemm(r.index, short_lda.with(on_device)); }),
        {r.kernel, "lda=2"}));
    GemmInputs past_end(kCases[0], gen);
    past_end.args.batch = 2;  // the tensors hold one matrix each
    EXPECT_TRUE(testing::contains_all(
        testing::error_of([&] { kernels::ladder::run_gemm(r.index, past_end.with(on_device)); }),
        {"gemm: A", "beyond its storage"}));
  }
}

}  // namespace
}  // namespace glass
