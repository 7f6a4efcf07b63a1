// Every rung of the matmul ladder on emu against the cpu GEMM (OpenBLAS) over the whole GemmArgs
// contract: sizes that leave partial tiles (33x17x45, 65x31x70 against 16 and 64 tiles, 1x1x1),
// transposes, padded leading dimensions, strided and broadcast batches, alpha, beta and a bias,
// and k = 0; random inputs; bit-identical results under shuffled thread order.
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

// The cpu GEMM on copies of the case's tensors (C is overwritten).
Tensor cpu_result(const GemmInputs& in) {
  const GemmArgs g = in.with(testing::to_cpu);
  kernels::cpu::gemm(g);
  return g.c;
}

TEST(MatmulLadder, EveryRungMatchesCpu) {
  Generator gen(11);
  for (const GemmCase& c : kCases) {
    const GemmInputs in(c, gen);
    const Tensor expected = cpu_result(in);
    for (const Rung& r : rungs(Op::matmul)) {
      SCOPED_TRACE(fmt::format("rung {} ({}), case {}", r.index, r.name, c.name));
      const GemmArgs g = in.with(on_device);
      testing::LaunchLog log;
      kernels::ladder::run_gemm(r.index, g);
      // Every rung is one launch; the production rung sends a GEMM with a bias to cuBLASLt, whose
      // BIAS epilogue adds it inside the GEMM.
      ASSERT_EQ(log.kernels().size(), 1u);
      EXPECT_EQ(log.kernels().front(),
                r.production && c.bias ? "cublasLtMatmul_bias" : std::string(r.kernel));
      EXPECT_TRUE(all_close(to_cpu(g.c), expected, 1e-5));
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
  for (const Rung& r : rungs(Op::matmul)) {
    SCOPED_TRACE(r.name);
    const Tensor c = testing::device_empty({33, 17});
    kernels::ladder::run_matmul(r.index, on_device(a), on_device(b), c);
    EXPECT_TRUE(all_close(to_cpu(c), expected, 1e-5));
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
  for (int rung = 0;
       rung < static_cast<int>(kernels::ladder::rungs(kernels::ladder::Op::matmul).size());
       ++rung) {
    SCOPED_TRACE(fmt::format("rung {}", rung));
    // beta != 0 reads C: start each run from the same C
    const Tensor c0 = on_device(in.c);
    testing::expect_deterministic({g.c}, [&] {
      kernels::cuda::copy(c0, g.c);
      kernels::ladder::run_gemm(rung, g);
    });
  }
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
