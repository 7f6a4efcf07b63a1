// kernels/cuda/gemm_lt.cu on `emu` (the engine's cuBLASLt call site, answered by the emulated
// cuBLASLt) against the cpu GEMM epilogues (GEMM, then gelu_forward, gelu_backward, sum_dim as
// separate kernels): every epilogue the engine uses, odd sizes, the GELU's padded aux rows; TF32
// only when asked; the heuristic cache; and the errors.
#include <cmath>

#include "emucuda/cublas/cublasLt.h"
#include "engine/launch.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/emu_cublas/emu_cublas_test.h"
#include "tests/testing.h"

namespace glass::emu_cublas_test {
namespace {

using glass::testing::all_close;
using kernels::GemmActivation;
using kernels::GemmArgs;
using kernels::GemmBiasGrad;
using kernels::GemmEpilogue;

struct LtCase {
  bool trans_a = false;
  int64_t m = 9, n = 13, k = 21;  // n = 13: aux rows padded to 16
  bool bias = false;
  GemmActivation activation = GemmActivation::none;
  GemmBiasGrad bias_grad = GemmBiasGrad::none;
};

// The same random operands on `device`: A stored m x k (k x m when transposed), B k x n, C m x n
// contiguous; aux m x aux_ld (random: gelu_backward reads it), the bias or bias gradient.
struct Operands {
  GemmArgs g;
  GemmEpilogue e;
  Operands(const LtCase& c, Device device) {
    g.trans_a = c.trans_a;
    g.m = c.m, g.n = c.n, g.k = c.k;
    g.lda = c.trans_a ? c.m : c.k, g.ldb = c.n, g.ldc = c.n;
    g.a = make(randoms(c.m * c.k, 1), {c.m * c.k}, device);
    g.b = make(randoms(c.k * c.n, 2), {c.k, c.n}, device);
    g.c = make(randoms(c.m * c.n, 3), {c.m, c.n}, device);
    if (c.bias) g.bias = make(randoms(c.n, 4), {c.n}, device);
    e.activation = c.activation;
    if (c.activation != GemmActivation::none) {
      e.aux_ld = kernels::gemm_aux_ld(c.n);
      e.aux = make(randoms(c.m * e.aux_ld, 5, 2.0), {c.m, e.aux_ld}, device);
    }
    e.bias_grad_of = c.bias_grad;
    if (c.bias_grad != GemmBiasGrad::none) {
      const int64_t len = c.bias_grad == GemmBiasGrad::rows_of_a ? c.m : c.n;
      e.bias_grad = make(randoms(len, 6), {len}, device);
    }
  }
};

void expect_lt_same_as_cpu(const LtCase& c, const char* name) {
  SCOPED_TRACE(name);
  const Operands emu(c, kEmu), cpu(c, kCPU);
  kernels::cuda::gemm_epilogue(emu.g, emu.e);
  kernels::cpu::gemm_epilogue(cpu.g, cpu.e);
  EXPECT_TRUE(all_close(as_double(read(emu.g.c)), as_double(read(cpu.g.c)), 1e-5)) << "C";
  if (c.activation == GemmActivation::gelu) {
    // The pre-activation in aux's first n columns of each row; the padding is not written.
    const std::vector<float> a_emu = read(emu.e.aux), a_cpu = read(cpu.e.aux),
                             before = randoms(c.m * emu.e.aux_ld, 5, 2.0);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < emu.e.aux_ld; ++j) {
        const int64_t at = i * emu.e.aux_ld + j;
        if (j < c.n) {
          EXPECT_NEAR(a_emu[at], a_cpu[at], 1e-5 * (1 + std::abs(a_cpu[at]))) << i << ", " << j;
        } else {
          EXPECT_EQ(a_emu[at], before[at]) << "aux padding written at " << i << ", " << j;
        }
      }
  }
  if (c.bias_grad != GemmBiasGrad::none) {
    EXPECT_TRUE(all_close(as_double(read(emu.e.bias_grad)), as_double(read(cpu.e.bias_grad)), 1e-5))
        << "bias gradient";
  }
}

// Every epilogue the engine uses, both A layouts, odd sizes, padded and unpadded aux rows.
void for_every_epilogue(void (*check)(const LtCase&, const char*)) {
  using A = GemmActivation;
  using G = GemmBiasGrad;
  for (bool ta : {false, true}) {
    check({.trans_a = ta, .bias = true}, "bias");
    check({.trans_a = ta, .bias = true, .activation = A::gelu}, "gelu + bias");
    check({.trans_a = ta, .activation = A::gelu}, "gelu");
    check({.trans_a = ta, .activation = A::gelu_backward}, "dgelu");
    check({.trans_a = ta, .activation = A::gelu_backward, .bias_grad = G::columns_of_c},
          "dgelu + bias gradient");
    check({.trans_a = ta, .bias_grad = G::rows_of_a}, "bias gradient of A");
    check({.trans_a = ta, .m = 1, .n = 1, .k = 1, .activation = A::gelu}, "1 x 1 gelu");
    check({.trans_a = ta, .m = 37, .n = 64, .k = 3, .bias = true, .activation = A::gelu},
          "aux without padding");
  }
}

TEST(EmuGemmLt, EveryEpilogueMatchesCpu) { for_every_epilogue(expect_lt_same_as_cpu); }

// While alive, every GEMM cuBLASLt would run goes to cuBLAS and separate launches instead (what
// gemm_lt does for a shape the heuristic has no algorithm for).
struct InPasses {
  InPasses() { kernels::set_gemm_epilogues_in_passes(true); }
  ~InPasses() { kernels::set_gemm_epilogues_in_passes(false); }
  InPasses(const InPasses&) = delete;
  InPasses& operator=(const InPasses&) = delete;
};

// The fallback for what cuBLASLt cannot run: the same results as cpu's epilogues. Its passes are
// cpu's (gemm_epilogue_passes, run with emu's kernels), so this checks the cuBLAS product, the
// bias add, the row sums and emu's kernels; the fused call above, whose epilogue the emulated
// cuBLASLt computes in its own loops, is the independent check of the passes.
TEST(EmuGemmLt, InPassesEveryEpilogueMatchesCpu) {
  const InPasses in_passes;
  for_every_epilogue(expect_lt_same_as_cpu);
}

TEST(EmuGemmLt, InPassesAnEpilogueIsAGemmAndItsLaunches) {
  const InPasses in_passes;
  const Operands emu({.bias = true, .activation = GemmActivation::gelu}, kEmu);
  testing::LaunchLog log;
  kernels::cuda::gemm_epilogue(emu.g, emu.e);
  EXPECT_EQ(log.kernels(),
            (std::vector<std::string>{"cublasSgemmStridedBatched", "add", "copy", "gelu_forward"}));
}

// The path itself: the emulated cuBLASLt's heuristic made to find nothing for DGELU_BGRAD, as the
// real one does for a combination it has no kernel for. gemm_lt runs that shape in passes (right,
// and said in the log), and remembers it: the next call asks no heuristic.
TEST(EmuGemmLt, AShapeTheHeuristicHasNoAlgorithmForRunsInPasses) {
  struct NoAlgorithm {
    NoAlgorithm() { glass_emu_cublasLtFindNoAlgorithmFor(CUBLASLT_EPILOGUE_DGELU_BGRAD); }
    ~NoAlgorithm() { glass_emu_cublasLtFindNoAlgorithmFor(CUBLASLT_EPILOGUE_DEFAULT); }
  } no_algorithm;
  const LtCase c{.m = 6,
                 .n = 10,
                 .k = 5,
                 .activation = GemmActivation::gelu_backward,
                 .bias_grad = GemmBiasGrad::columns_of_c};
  expect_lt_same_as_cpu(c, "dgelu + bias gradient without an algorithm");
  const int64_t cached = kernels::cuda::gemm_lt_cached_shapes();
  const Operands again(c, kEmu);
  testing::LaunchLog log;
  kernels::cuda::gemm_epilogue(again.g, again.e);
  // aux rows padded to 16: gelu_backward reads a contiguous copy
  EXPECT_EQ(log.kernels(), (std::vector<std::string>{"cublasSgemmStridedBatched", "copy",
                                                     "gelu_backward", "sum_dim"}));
  EXPECT_EQ(kernels::cuda::gemm_lt_cached_shapes(), cached);
}

// gemm() with a bias over a strided batch with padded rows: the bias reaches every row of every
// entry, and nothing between them.
TEST(EmuGemmLt, InPassesABatchedGemmGetsItsBiasInEveryEntry) {
  const InPasses in_passes;
  const int64_t m = 3, n = 5, k = 4, batch = 2, ldc = 7, stride_c = m * ldc + 2;
  auto operands = [&](Device device) {
    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.batch = batch;
    g.lda = k, g.ldb = n, g.ldc = ldc;
    g.stride_a = m * k, g.stride_b = 0, g.stride_c = stride_c;
    g.a = make(randoms(batch * m * k, 11), {batch * m * k}, device);
    g.b = make(randoms(k * n, 12), {k * n}, device);
    g.c = make(randoms(batch * stride_c, 13), {batch * stride_c}, device);
    g.bias = make(randoms(n, 14), {n}, device);
    return g;
  };
  const GemmArgs emu = operands(kEmu), cpu = operands(kCPU);
  kernels::cuda::gemm(emu);
  kernels::cpu::gemm(cpu);
  EXPECT_TRUE(all_close(as_double(read(emu.c)), as_double(read(cpu.c)), 1e-5));
}

TEST(EmuGemmLt, EachEpilogueIsOneLaunchNamedAfterIt) {
  const LtCase c{.bias = true, .activation = GemmActivation::gelu};
  const Operands emu(c, kEmu);
  testing::LaunchLog log;
  kernels::cuda::gemm_epilogue(emu.g, emu.e);
  EXPECT_EQ(log.kernels(), std::vector<std::string>{"cublasLtMatmul_gelu_aux_bias"});
}

// --tf32: f32 GEMMs go to cuBLASLt with CUBLAS_COMPUTE_32F_FAST_TF32, whose inputs keep 10
// mantissa bits; off (the default), they are exact f32 SGEMMs. 1 + 2^-12 shows the difference.
TEST(EmuGemmLt, Tf32OnlyWhenAsked) {
  const float x = 1.0f + std::ldexp(1.0f, -12);
  auto run = [&](bool tf32) {
    kernels::set_tf32(tf32);
    GemmArgs g;
    g.m = g.n = g.k = 1;
    g.lda = g.ldb = g.ldc = 1;
    g.a = make(std::vector<float>{x}, {1}, kEmu);
    g.b = make(std::vector<float>{3.0f}, {1}, kEmu);
    g.c = make(std::vector<float>{0.0f}, {1}, kEmu);
    testing::LaunchLog log;
    kernels::cuda::gemm(g);
    kernels::set_tf32(false);
    return std::pair{read(g.c)[0], log.kernels().at(0)};
  };
  EXPECT_FALSE(kernels::tf32_enabled());  // the default
  const auto [exact, exact_kernel] = run(false);
  EXPECT_EQ(exact, x * 3.0f);
  EXPECT_EQ(exact_kernel, "cublasSgemmStridedBatched");
  const auto [rounded, tf32_kernel] = run(true);
  EXPECT_EQ(rounded, 3.0f);
  EXPECT_EQ(tf32_kernel, "cublasLtMatmul");
}

TEST(EmuGemmLt, HeuristicResultsAreCachedPerShape) {
  const LtCase c{.m = 5, .n = 11, .k = 3, .bias = true};
  {
    const Operands first(c, kEmu);
    kernels::cuda::gemm_epilogue(first.g, first.e);
  }
  const int64_t cached = kernels::cuda::gemm_lt_cached_shapes();
  for (int i = 0; i < 3; ++i) {
    const Operands again(c, kEmu);
    kernels::cuda::gemm_epilogue(again.g, again.e);
  }
  // New tensors of the same shape (the allocator hands out aligned blocks): no new heuristic.
  EXPECT_EQ(kernels::cuda::gemm_lt_cached_shapes(), cached);
  LtCase other = c;
  other.k = 4;
  const Operands different(other, kEmu);
  kernels::cuda::gemm_epilogue(different.g, different.e);
  EXPECT_EQ(kernels::cuda::gemm_lt_cached_shapes(), cached + 1);
}

TEST(EmuGemmLt, BadEpilogueArgumentsAreErrorsNamingThem) {
  Operands o({.activation = GemmActivation::gelu}, kEmu);
  o.e.aux_ld = 13;
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm_epilogue(o.g, o.e); }),
                  "gemm epilogue gelu_aux: aux_ld 13 must be 16 for n = 13");
  Operands b({.bias = true, .bias_grad = GemmBiasGrad::rows_of_a}, kEmu);
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm_epilogue(b.g, b.e); }),
                  "cannot be added here");
  Operands g({.bias_grad = GemmBiasGrad::columns_of_c}, kEmu);
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm_epilogue(g.g, g.e); }),
                  "the column sums of C come only with gelu_backward");
  // A wrong leading dimension reaches cuBLASLt, which refuses it: the error names the call.
  Operands l({.bias = true}, kEmu);
  l.g.ldb = 12;  // B is k x n = 21 x 13 row-major: ldb must be at least 13
  l.g.ldc = 13;
  const std::string e = error_of([&] { kernels::cuda::gemm(l.g); });
  EXPECT_CONTAINS(e, "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_CONTAINS(e, "cublasLtMatmulAlgoGetHeuristic");
}

}  // namespace
}  // namespace glass::emu_cublas_test
