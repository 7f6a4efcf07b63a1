// The timing harness: a row per rung with the rung's identity, positive times, and the FLOPs and
// ideal bytes its launches declare (the same for every rung of an op: 2 M N K and the operands'
// bytes); the table; errors for a device without ladders, a bad shape or a bad rung.
#include "kernels/ladder_timing.h"
#include "tests/ladder/ladder_test.h"

namespace glass {
namespace {

using kernels::ladder::LadderRow;
using kernels::ladder::Op;
using kernels::ladder::time_ladder;
using kernels::ladder::TimingOptions;
using testing::contains_all;
using testing::error_of;

const TimingOptions kQuick{.warmup = 1, .repeats = 3};

// The rows of every rung of `op`. Their bytes are `bytes`, except for matmul's Tensor Core rung,
// which rounds its f32 operands to bf16 first: `tensor_core_bytes`.
void expect_rows(const std::vector<LadderRow>& rows, Op op, double flops, double bytes,
                 double tensor_core_bytes = 0) {
  const int n = kernels::ladder::rung_count(op);
  ASSERT_EQ(rows.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(rows[i].rung->name);
    EXPECT_EQ(rows[i].op, op);
    EXPECT_EQ(rows[i].rung->index, i);
    EXPECT_EQ(rows[i].rung->production, i == kernels::ladder::production_rung(op));
    EXPECT_EQ(rows[i].repeats, 3);
    EXPECT_GT(rows[i].min_us, 0);
    EXPECT_LE(rows[i].min_us, rows[i].median_us);
    EXPECT_DOUBLE_EQ(rows[i].flops, flops);
    const double expected = op == Op::matmul && i == 4 ? tensor_core_bytes : bytes;
    EXPECT_DOUBLE_EQ(rows[i].bytes, expected);
    EXPECT_DOUBLE_EQ(rows[i].gb_per_s(), expected / (rows[i].median_us * 1e3));
  }
}

TEST(LadderTiming, RowPerRungWithFlopsAndIdealBytes) {
  // rung 4: A (33 x 45) and B (45 x 17) read as f32 and written as bf16 with rows padded to 48
  // and 24, then the bf16 product: 2 bytes per element of A and B, 4 per element of C
  const double rounding = 4.0 * (33 * 45 + 45 * 17) + 2.0 * (33 * 48 + 45 * 24);
  expect_rows(time_ladder(Op::matmul, kEmu, {33, 17, 45}, {}, kQuick), Op::matmul,
              2.0 * 33 * 17 * 45, 4.0 * (33 * 45 + 45 * 17 + 33 * 17),
              rounding + 2.0 * (33 * 45 + 45 * 17) + 4.0 * 33 * 17);
  expect_rows(time_ladder(Op::softmax, kEmu, {37, 45}, {}, kQuick), Op::softmax, 5.0 * 37 * 45,
              2 * 4.0 * 37 * 45);
  expect_rows(time_ladder(Op::layernorm, kEmu, {37, 45}, {}, kQuick), Op::layernorm, 8.0 * 37 * 45,
              4.0 * (2 * 37 * 45 + 2 * 45 + 2 * 37));
  // x, y and weight; one rstd per row
  expect_rows(time_ladder(Op::rmsnorm, kEmu, {37, 45}, {}, kQuick), Op::rmsnorm, 4.0 * 37 * 45,
              4.0 * (2 * 37 * 45 + 45 + 37));
}

// bf16 RMSNorm: both rungs take it; x, y and weight at 2 bytes, rstd still f32.
TEST(LadderTiming, Bf16RmsNormRunsBothRungs) {
  const TimingOptions bf16{.warmup = 0, .repeats = 1, .dtype = DType::bf16};
  const std::vector<LadderRow> rows = time_ladder(Op::rmsnorm, kEmu, {37, 45}, {}, bf16);
  ASSERT_EQ(rows.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(rows[i].rung->index, i);
    EXPECT_DOUBLE_EQ(rows[i].flops, 4.0 * 37 * 45);
    EXPECT_DOUBLE_EQ(rows[i].bytes, 2.0 * (2 * 37 * 45 + 45) + 4.0 * 37);
  }
}

// bf16 operands: matmul's rungs that take them, cuBLAS (3) and the Tensor Cores (4), 2 bytes per
// element of A, B and C; each row names the unit of its launches (the roofline's compute roof).
TEST(LadderTiming, Bf16MatmulRunsTheRungsThatTakeBf16) {
  const TimingOptions bf16{.warmup = 0, .repeats = 1, .dtype = DType::bf16};
  const std::vector<LadderRow> rows = time_ladder(Op::matmul, kEmu, {33, 17, 45}, {}, bf16);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].rung->index, 3);
  EXPECT_EQ(rows[1].rung->index, 4);
  for (const LadderRow& r : rows) {
    EXPECT_DOUBLE_EQ(r.flops, 2.0 * 33 * 17 * 45);
    EXPECT_DOUBLE_EQ(r.bytes, 2.0 * (33 * 45 + 45 * 17 + 33 * 17));
  }
  EXPECT_EQ(rows[1].unit, ComputeUnit::tensor_core_bf16);
  // f32: the rungs of the CUDA cores say so
  const int naive[] = {0};
  EXPECT_EQ(time_ladder(Op::matmul, kEmu, {8, 8, 8}, naive, kQuick).front().unit,
            ComputeUnit::cuda_core);
  EXPECT_TRUE(
      contains_all(error_of([&] {
                     time_ladder(Op::matmul, kEmu, {8, 8, 8}, std::vector<int>{2}, bf16);
                   }),
                   {"rung 2 (register) takes f32 operands only", "3 cublas, 4 tensor_core"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             time_ladder(Op::softmax, kEmu, {8, 8}, {}, bf16);
                           }),
                           {"softmax runs on f32 operands", "bf16"}));
}

TEST(LadderTiming, ChosenRungsAndTable) {
  const int chosen[] = {3, 0};
  const std::vector<LadderRow> rows = time_ladder(Op::softmax, kEmu, {5, 1}, chosen, kQuick);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].rung->index, 3);
  EXPECT_EQ(rows[1].rung->index, 0);
  const std::string table = kernels::ladder::ladder_table(rows);
  EXPECT_TRUE(contains_all(
      table, {"GB/s", "GFLOP/s", "softmax_forward_float4", "float4", "softmax_forward_naive"}));
  const std::string production = kernels::ladder::ladder_table(
      time_ladder(Op::softmax, kEmu, {5, 1}, std::vector<int>{2}, kQuick));
  EXPECT_TRUE(contains_all(production, {"2*", "softmax_forward "}));
}

TEST(LadderTiming, BadRequestsAreNamed) {
  EXPECT_TRUE(contains_all(error_of([] {
                             time_ladder(Op::softmax, kCPU, {4, 4});
                           }),
                           {"emu or cuda", "cpu"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             time_ladder(Op::matmul, kEmu, {4, 4});
                           }),
                           {"matmul", "M, N, K", "[4, 4]"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             time_ladder(Op::layernorm, kEmu, {0, 4});
                           }),
                           {"layernorm", "positive", "[0, 4]"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             time_ladder(Op::layernorm, kEmu, {4, 4}, std::vector<int>{1, 9});
                           }),
                           {"layernorm has no rung 9"}));
}

}  // namespace
}  // namespace glass
