// The attention ladder (kernels/cuda/ladder/attention_ladder.cu, and rung 4, the Tensor Core
// kernel kernels/cuda/flash_attention_mma.cu) on emu: every rung against the cpu flash entry run
// in f64 (out and lse), with T of one partial tile, several tiles, and the largest head dim (the
// bf16 rung on bf16-rounded inputs, to bf16 rounding, where it takes the head dim), and
// grouped-query attention (fewer key/value heads than query heads; the cpu entry checked against
// PyTorch in tests/kernels/test_attention_torch_oracle.cpp); the bytes and the memory each rung
// reports, as docs/kernel_ladders.md argues them (the T x T matrix through memory four times, then
// twice, then never; the mma rung's heads in bf16); and the backend entry following
// GLASS_KERNEL_VARIANT's attention rung.
#include <cmath>

#include "kernels/ladder_timing.h"
#include "tests/ladder/ladder_test.h"

namespace glass {
namespace {

using testing::all_close;
using testing::device_empty;
using testing::on_device;
using testing::to_cpu;
namespace ladder = kernels::ladder;

TEST(AttentionRungs, EveryRungMatchesTheF64Reference) {
  Generator gen(41);
  struct Case {
    int64_t B, H, Hkv, T, D;
  };
  for (const Case c : {Case{1, 3, 3, 7, 16}, Case{2, 1, 1, 45, 32}, Case{1, 1, 1, 20, 128},
                       Case{1, 4, 2, 19, 32}, Case{2, 3, 1, 9, 16}}) {
    const int64_t C = c.H * c.D, W = (c.H + 2 * c.Hkv) * c.D;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    // bf16-representable inputs, so that the bf16 rung starts from the same numbers
    const Tensor qkv = cast(cast(randn({c.B, c.T, W}, gen), DType::bf16), DType::f32);
    const Tensor out64 = Tensor::empty({c.B, c.T, C}, DType::f64);
    const Tensor lse64 = Tensor::empty({c.B, c.H, c.T});
    kernels::cpu::flash_attention_forward(cast(qkv, DType::f64), out64, lse64, c.H, c.Hkv, scale);
    for (const ladder::Rung& rung : ladder::rungs(ladder::Op::attention)) {
      SCOPED_TRACE("rung " + std::to_string(rung.index) + " T " + std::to_string(c.T) + " D " +
                   std::to_string(c.D) + " H " + std::to_string(c.H) + " Hkv " +
                   std::to_string(c.Hkv));
      const DType dtype = rung.f32 ? DType::f32 : DType::bf16;  // the mma rung: bf16 only
      if (dtype == DType::bf16 && !kernels::flash_mma_head_dim_ok(c.D)) continue;
      const Tensor out = device_empty({c.B, c.T, C}, dtype), lse = device_empty({c.B, c.H, c.T});
      ladder::run_attention_forward(rung.index, on_device(cast(qkv, dtype)), out, lse, c.H, c.Hkv,
                                    scale);
      // bf16: the output stored in bf16 and P rounded to bf16 before P V (2 units of 2^-8, as
      // tests/cuda_kernels/test_flash_attention_mma.cpp argues); lse stays f32
      EXPECT_TRUE(
          all_close(cast(to_cpu(out), DType::f32), out64, dtype == DType::bf16 ? 2.0 / 256 : 1e-5));
      EXPECT_TRUE(all_close(to_cpu(lse), lse64, dtype == DType::bf16 ? 2e-5 : 1e-6));
    }
  }
}

TEST(AttentionRungs, BytesAndMemoryFollowTheTxTMatrix) {
  const int64_t B = 1, H = 2, T = 64, D = 32;  // a head dim every rung takes
  const std::vector<ladder::LadderRow> rows =
      ladder::time_ladder(ladder::Op::attention, testing::kKernelDevice, {B, H, T, D}, {}, {0, 1});
  ASSERT_EQ(rows.size(), 5u);
  const double square = B * H * T * T * 4.0;  // one [B, H, T, T] f32
  // rungs 0 and 1 hold the T x T matrix; the tiled rungs allocate nothing
  EXPECT_GE(rows[0].allocated_bytes, square);
  EXPECT_GE(rows[1].allocated_bytes, square);
  EXPECT_EQ(rows[2].allocated_bytes, 0);
  EXPECT_EQ(rows[3].allocated_bytes, 0);
  EXPECT_EQ(rows[4].allocated_bytes, 0);
  // the T x T matrix through memory: S written, S read, P written, P read (rung 0); P written and
  // read (rung 1); never (rungs 2 and 3, whose bytes are the heads and lse only)
  const double heads = B * T * H * D * 4.0;  // one of q, k, v or out
  const double lse = B * H * T * 4.0;
  EXPECT_DOUBLE_EQ(rows[0].bytes, 4 * square + 4 * heads + lse);
  EXPECT_DOUBLE_EQ(rows[1].bytes, 2 * square + 4 * heads + lse);
  // Q read and O written once; K and V once per query tile: both tiled rungs have 32-row query
  // tiles, which read keys 0..31 and 0..63 (1.5 T rows)
  EXPECT_DOUBLE_EQ(rows[2].bytes, (2 + 2 * 1.5) * heads + lse);
  EXPECT_DOUBLE_EQ(rows[3].bytes, (2 + 2 * 1.5) * heads + lse);
  // the mma rung: heads in bf16 (half the bytes) and 128-row query tiles, so at T = 64 one tile
  // reads K and V once (1.0 T rows)
  EXPECT_DOUBLE_EQ(rows[4].bytes, (2 + 2 * 1.0) * heads / 2 + lse);
  // every rung does the same useful FLOPs up to the softmax's count, on the CUDA cores but the last
  for (const ladder::LadderRow& r : rows) EXPECT_GT(r.flops, 4.0 * D * B * H * T * (T + 1) / 2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(rows[i].unit, ComputeUnit::cuda_core) << i;
  EXPECT_EQ(rows[4].unit, ComputeUnit::tensor_core_bf16);
}

TEST(AttentionRungs, AllRungsLeaveOutTheTensorCoreRungWhereItCannotRun) {
  const ladder::TimingOptions quick{0, 1};
  const std::vector<ladder::LadderRow> rows =
      ladder::time_ladder(ladder::Op::attention, testing::kKernelDevice, {1, 1, 8, 16}, {}, quick);
  ASSERT_EQ(rows.size(), 4u);  // head dim 16: rungs 0..3
  EXPECT_EQ(rows.back().rung->index, 3);
  // in bf16: the rungs that take it, flash on the CUDA cores and mma on the Tensor Cores
  const std::vector<ladder::LadderRow> bf16 =
      ladder::time_ladder(ladder::Op::attention, testing::kKernelDevice, {1, 1, 8, 32}, {},
                          {.warmup = 0, .repeats = 1, .dtype = DType::bf16});
  ASSERT_EQ(bf16.size(), 2u);
  EXPECT_EQ(bf16[0].rung->index, 3);
  EXPECT_EQ(bf16[0].unit, ComputeUnit::cuda_core);
  EXPECT_EQ(bf16[1].rung->index, 4);
  EXPECT_EQ(bf16[1].unit, ComputeUnit::tensor_core_bf16);
  const int mma[] = {4};  // asked for by name, it says why not
  EXPECT_TRUE(
      testing::contains_all(testing::error_of([&] {
                              ladder::time_ladder(ladder::Op::attention, testing::kKernelDevice,
                                                  {1, 1, 8, 16}, mma, quick);
                            }),
                            {"flash_attention_forward_mma", "head dim D", "32, 64 or 128"}));
}

TEST(AttentionRungs, TheBackendEntryRunsTheSelectedRung) {
  Generator gen(42);
  const int64_t B = 1, T = 9, H = 2, C = 32;
  const Tensor qkv = on_device(randn({B, T, 3 * C}, gen));
  const Tensor production = causal_attention(qkv, H, AttentionKernel::flash);
  ladder::Selection s = ladder::default_selection();
  s.rung[static_cast<size_t>(ladder::Op::attention)] = 0;
  const testing::ScopedSelection selected(s);
  testing::LaunchLog log;
  const Tensor naive = causal_attention(qkv, H, AttentionKernel::flash);
  EXPECT_EQ(log.kernels(), (std::vector<std::string>{"attention_scores_naive",
                                                     "attention_softmax_naive", "attention_pv"}));
  EXPECT_TRUE(all_close(to_cpu(naive), to_cpu(production), 1e-5));
}

}  // namespace
}  // namespace glass
