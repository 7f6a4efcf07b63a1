// kernels/cuda/gemm.cu on `emu` (the engine's cuBLAS call site, answered by the emulated cuBLAS)
// against the cpu GEMM on the same data: every transpose combination, padded leading dimensions,
// batches with a shared (stride 0) operand, alpha/beta and bias; then the errors a wrong leading
// dimension, transpose flag, extent or dtype must raise, and the launches observers see.
#include <algorithm>

#include "engine/launch.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/emu_cublas/emu_cublas_test.h"
#include "tests/testing.h"

namespace glass::emu_cublas_test {
namespace {

using glass::testing::all_close;
using kernels::GemmArgs;

struct Case {
  bool trans_a = false, trans_b = false;
  int64_t m = 7, n = 13, k = 33, batch = 1, pad = 0;
  bool shared_a = false, bias = false;
  double alpha = 1, beta = 0;
};

// Row-major operands for `c` on `device`, from fixed seeds: A stored m x k (k x m transposed), B
// k x n (n x k), each row `pad` elements longer than needed, batch entries one after another
// (A's all one matrix when shared_a). The tensors are flat: gemm reads only their storage.
GemmArgs make_args(const Case& c, Device device) {
  GemmArgs g;
  g.trans_a = c.trans_a;
  g.trans_b = c.trans_b;
  g.m = c.m, g.n = c.n, g.k = c.k, g.batch = c.batch;
  const int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  const int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  // A leading dimension is at least 1, even for an empty row (as cuBLAS and the cpu GEMM require).
  g.lda = std::max<int64_t>(1, a_cols) + c.pad, g.ldb = std::max<int64_t>(1, b_cols) + c.pad;
  g.ldc = std::max<int64_t>(1, c.n) + c.pad;
  g.stride_a = c.shared_a ? 0 : a_rows * g.lda;
  g.stride_b = b_rows * g.ldb;
  g.stride_c = c.m * g.ldc;
  const int64_t a_size = c.shared_a ? a_rows * g.lda : g.stride_a * c.batch;
  g.a = make(randoms(a_size, 1), {a_size}, device);
  g.b = make(randoms(g.stride_b * c.batch, 2), {g.stride_b * c.batch}, device);
  g.c = make(randoms(g.stride_c * c.batch, 3), {g.stride_c * c.batch}, device);
  if (c.bias) g.bias = make(randoms(c.n, 4), {c.n}, device);
  g.alpha = c.alpha, g.beta = c.beta;
  return g;
}

// C from the emu GEMM and from the cpu GEMM, padding included.
void expect_same_as_cpu(const Case& c) {
  const GemmArgs on_emu = make_args(c, kEmu), on_cpu = make_args(c, kCPU);
  kernels::cuda::gemm(on_emu);
  kernels::cpu::gemm(on_cpu);
  EXPECT_TRUE(all_close(as_double(read(on_emu.c)), as_double(read(on_cpu.c)), 1e-5))
      << "trans_a " << c.trans_a << " trans_b " << c.trans_b << " m " << c.m << " n " << c.n
      << " k " << c.k << " batch " << c.batch << " pad " << c.pad << " bias " << c.bias;
}

TEST(EmuGemm, MatchesCpuForEveryTransposeCombination) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t pad : {0, 3}) {
        expect_same_as_cpu({.trans_a = ta, .trans_b = tb, .pad = pad});
        expect_same_as_cpu({.trans_a = ta, .trans_b = tb, .m = 33, .n = 1, .k = 7, .pad = pad});
        expect_same_as_cpu({.trans_a = ta, .trans_b = tb, .m = 1, .n = 37, .k = 1, .pad = pad});
      }
}

TEST(EmuGemm, MatchesCpuWithBatchesBiasAlphaBeta) {
  expect_same_as_cpu({.batch = 3, .alpha = 0.5, .beta = 1.5});
  expect_same_as_cpu({.trans_b = true, .batch = 4, .pad = 2, .shared_a = true, .bias = true});
  expect_same_as_cpu({.trans_a = true,
                      .m = 37,
                      .n = 300,
                      .k = 13,
                      .batch = 2,
                      .bias = true,
                      .alpha = -1,
                      .beta = 0.25});
  // An empty inner dimension: C = beta C + bias.
  expect_same_as_cpu({.k = 0, .batch = 2, .bias = true, .beta = 2});
  expect_same_as_cpu({.k = 0, .beta = 0.5});
}

TEST(EmuGemm, WrongLeadingDimensionOrTransposeFlagFailsInCublas) {
  GemmArgs g = make_args({}, kEmu);  // A is 7 x 33, lda 33
  const std::vector<float> c_before = read(g.c);
  g.lda = 32;
  std::string e = error_of([&] { kernels::cuda::gemm(g); });
  EXPECT_CONTAINS(e, "cublasSgemmStridedBatched returned CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_CONTAINS(e, "lda=32");
  EXPECT_CONTAINS(e, "f32[231] on emu");
  EXPECT_EQ(read(g.c), c_before) << "a refused GEMM must leave C untouched";
  // A held transposed (33 x 7, lda 7) but passed as not transposed: lda 7 < k = 33.
  g = make_args({.trans_a = true}, kEmu);
  g.trans_a = false;
  e = error_of([&] { kernels::cuda::gemm(g); });
  EXPECT_CONTAINS(e, "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_CONTAINS(e, "trans_a=false");
  g = make_args({}, kEmu);
  g.ldc = 12;
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm(g); }), "ldc=12");
}

TEST(EmuGemm, EngineChecksWhatCublasCannotSee) {
  GemmArgs g = make_args({.batch = 2}, kEmu);
  g.stride_b += 1;  // the second B runs past the end of its storage
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm(g); }),
                  "B (33 x 13 as stored) reaches element");
  g = make_args({.batch = 2}, kEmu);
  g.stride_c = 1;
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm(g); }), "overlap");
  g = make_args({}, kEmu);
  g.a = Tensor::empty({7 * 33}, DType::f64, kEmu);
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm(g); }), "must be f32");
  g = make_args({}, kEmu);
  g.b = make(randoms(33 * 13, 2), {33 * 13}, kCPU);
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm(g); }), "on C's device emu");
  g = make_args({.bias = true}, kEmu);
  g.bias = make(randoms(12, 4), {12}, kEmu);
  EXPECT_CONTAINS(error_of([&] { kernels::cuda::gemm(g); }), "bias must be contiguous with n");
}

// Records the launches it sees.
struct Recorder : LaunchObserver {
  std::vector<LaunchInfo> launches;
  void on_launch_begin(const LaunchInfo& info) override { launches.push_back(info); }
};

TEST(EmuGemm, LaunchesAreVisibleWithTheirCost) {
  // Without a bias: one cuBLAS SGEMM.
  GemmArgs g = make_args({.batch = 3}, kEmu);
  Recorder recorder;
  subscribe(&recorder);
  kernels::cuda::gemm(g);
  unsubscribe(&recorder);
  ASSERT_EQ(recorder.launches.size(), 1u);
  const LaunchInfo& gemm = recorder.launches[0];
  EXPECT_STREQ(gemm.kernel, "cublasSgemmStridedBatched");
  EXPECT_EQ(gemm.device, kEmu);
  EXPECT_EQ(gemm.flops, 2.0 * 7 * 13 * 33 * 3);
  EXPECT_EQ(gemm.bytes, 4.0 * 3 * (7 * 33 + 33 * 13 + 7 * 13));
  // With a bias: one cuBLASLt matmul whose BIAS epilogue adds it (no second launch), one more
  // FLOP per element of C, and the bias read once.
  g = make_args({.batch = 3, .bias = true}, kEmu);
  Recorder with_bias;
  subscribe(&with_bias);
  kernels::cuda::gemm(g);
  unsubscribe(&with_bias);
  ASSERT_EQ(with_bias.launches.size(), 1u);
  EXPECT_STREQ(with_bias.launches[0].kernel, "cublasLtMatmul_bias");
  EXPECT_EQ(with_bias.launches[0].flops, 2.0 * 7 * 13 * 33 * 3 + 7 * 13 * 3);
  EXPECT_EQ(with_bias.launches[0].bytes, 4.0 * (3 * (7 * 33 + 33 * 13 + 7 * 13) + 13));
}

}  // namespace
}  // namespace glass::emu_cublas_test
