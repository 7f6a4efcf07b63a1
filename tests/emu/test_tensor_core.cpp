// The Tensor Core instructions on the emulator (engine/emu/tensor_core.cpp): the fragment tables
// of engine/emu/mma_fragments.h against a second published source, one warp's mma through
// cp.async and ldmatrix against a plain matrix product, and the rules a GPU leaves undefined
// that the emulator reports.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "engine/emu/launch.h"
#include "engine/emu/mma_fragments.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

using TensorCoreTest = EmuTest;
using glass::mma::RowCol;

// --- the tables against CUTLASS's CuTe, whose MMA atom SM80_16x8x16_F32BF16BF16F32_TN describes
// the same fragments as layouts: (thread, value) -> a column-major offset in the matrix, thread =
// (t0, t1) with shape (4, 8), value = (v0, v1, v2). Written here from the atom's shapes and
// strides, independently of mma_fragments.h's formulas:
//   A (16x16, offset m + 16k): shape ((4,8),(2,2,2)), stride ((32,1),(16,8,128))
//   B (8x16 as n + 8k):        shape ((4,8),(2,2)),   stride ((16,1),(8,64))
//   C (16x8, offset m + 16n):  shape ((4,8),(2,2)),   stride ((32,1),(16,8))
int cute_offset(int lane, int value, const std::vector<int>& value_shape,
                const std::vector<int>& value_stride, int t0_stride, int t1_stride) {
  int offset = (lane % 4) * t0_stride + (lane / 4) * t1_stride;
  for (size_t d = 0; d < value_shape.size(); ++d) {
    offset += (value % value_shape[d]) * value_stride[d];
    value /= value_shape[d];
  }
  return offset;
}

TEST(MmaFragments, MatchCuteAtomLayoutsForEveryLaneAndRegister) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const int off = cute_offset(lane, i, {2, 2, 2}, {16, 8, 128}, 32, 1);
      const RowCol e = glass::mma::a_element(lane, i);
      EXPECT_EQ(e.row, off % 16) << "A lane " << lane << " element " << i;
      EXPECT_EQ(e.col, off / 16) << "A lane " << lane << " element " << i;
    }
    for (int i = 0; i < 4; ++i) {
      const int off_b = cute_offset(lane, i, {2, 2}, {8, 64}, 16, 1);
      const RowCol b = glass::mma::b_element(lane, i);
      EXPECT_EQ(b.col, off_b % 8) << "B lane " << lane << " element " << i;
      EXPECT_EQ(b.row, off_b / 8) << "B lane " << lane << " element " << i;
      const int off_c = cute_offset(lane, i, {2, 2}, {16, 8}, 32, 1);
      const RowCol c = glass::mma::c_element(lane, i);
      EXPECT_EQ(c.row, off_c % 16) << "C lane " << lane << " element " << i;
      EXPECT_EQ(c.col, off_c / 16) << "C lane " << lane << " element " << i;
    }
  }
}

// Each table covers its matrix exactly once over the warp.
TEST(MmaFragments, EveryElementHasExactlyOneLaneAndRegister) {
  std::set<std::pair<int, int>> a, b, c;
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      const RowCol e = glass::mma::a_element(lane, i);
      a.insert({e.row, e.col});
    }
    for (int i = 0; i < 4; ++i) {
      const RowCol eb = glass::mma::b_element(lane, i), ec = glass::mma::c_element(lane, i);
      b.insert({eb.row, eb.col});
      c.insert({ec.row, ec.col});
    }
  }
  EXPECT_EQ(a.size(), 256u);
  EXPECT_EQ(b.size(), 128u);
  EXPECT_EQ(c.size(), 128u);
}

// The PTX ISA's reason for ldmatrix: x4 over a row-major 16x16 tile (lane -> row lane % 16,
// column 8 * (lane / 16)) hands each lane exactly its mma A registers, and .trans over a
// k-major tile (rows are k) its B registers.
TEST(MmaFragments, LdmatrixDeliversMmaFragments) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg)
      for (int half = 0; half < 2; ++half) {
        const RowCol in_matrix = glass::mma::ldmatrix_element(lane, half, /*trans=*/false);
        const int row_lane = 8 * reg + in_matrix.row;  // the lane that addressed this row
        const RowCol tile{row_lane % 16, 8 * (row_lane / 16) + in_matrix.col};
        const RowCol a = glass::mma::a_element(lane, 2 * reg + half);
        EXPECT_EQ(tile.row, a.row) << lane << " " << reg << " " << half;
        EXPECT_EQ(tile.col, a.col) << lane << " " << reg << " " << half;
      }
    for (int reg = 0; reg < 2; ++reg)
      for (int half = 0; half < 2; ++half) {
        const RowCol in_matrix = glass::mma::ldmatrix_element(lane, half, /*trans=*/true);
        const RowCol b = glass::mma::b_element(lane, 2 * reg + half);
        EXPECT_EQ(8 * reg + in_matrix.row, b.row) << lane << " " << reg << " " << half;
        EXPECT_EQ(in_matrix.col, b.col) << lane << " " << reg << " " << half;
      }
  }
}

uint16_t bf16_bits(float v) {  // v must be exactly representable in bf16
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<uint16_t>(u >> 16);
}

// One warp: cp.async -> ldmatrix -> mma, against the product computed here in double.
TEST_F(TensorCoreTest, MmaOfOneTileEqualsTheMatrixProduct) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-64, 64);
  // Values k/16 are exact in bf16; distinct enough that a misplaced element shows.
  std::vector<float> a(256), b(128), c(128);
  std::vector<uint16_t> a_bits(256), b_bits(128);
  for (int i = 0; i < 256; ++i) a_bits[i] = bf16_bits(a[i] = small(rng) / 16.0f);
  for (int i = 0; i < 128; ++i) b_bits[i] = bf16_bits(b[i] = small(rng) / 16.0f);
  for (float& v : c) v = small(rng) / 8.0f;
  std::vector<float> d(128, -1);
  launch_kernel("mma_tile", mma_tile, dim3(1), dim3(32), 0, a_bits.data(), b_bits.data(), c.data(),
                d.data());
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double ref = c[m * 8 + n];
      for (int k = 0; k < 16; ++k) ref += static_cast<double>(a[m * 16 + k]) * b[k * 8 + n];
      EXPECT_EQ(d[m * 8 + n], static_cast<float>(ref)) << "row " << m << " column " << n;
    }
}

TEST_F(TensorCoreTest, MmaInADivergedWarpIsAnErrorNamingKernelAndLine) {
  std::vector<float> out(32);
  const std::string msg = emu_error_of([&] {
    launch_kernel("mma_in_diverged_warp", mma_in_diverged_warp, dim3(1), dim3(32), 0, out.data());
  });
  EXPECT_NE(msg.find("mma_in_diverged_warp"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mma.sync.aligned.m16n8k16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor_core.cu:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("had exited"), std::string::npos) << msg;
}

TEST_F(TensorCoreTest, LanesAtTwoDifferentMmasAreAnError) {
  std::vector<float> out(32);
  const std::string msg = emu_error_of([&] {
    launch_kernel("mma_at_two_sites", mma_at_two_sites, dim3(1), dim3(32), 0, out.data());
  });
  EXPECT_NE(msg.find("must execute the same mma/ldmatrix"), std::string::npos) << msg;
}

TEST_F(TensorCoreTest, LanesDisagreeingOnTheShapeAreAnError) {
  std::vector<uint32_t> out(32);
  const std::string msg = emu_error_of([&] {
    launch_kernel("ldmatrix_shapes_disagree", ldmatrix_shapes_disagree, dim3(1), dim3(32), 0,
                  out.data());
  });
  EXPECT_NE(msg.find("disagree"), std::string::npos) << msg;
  EXPECT_NE(msg.find(".x4"), std::string::npos) << msg;
  EXPECT_NE(msg.find(".x2"), std::string::npos) << msg;
}

TEST_F(TensorCoreTest, MisalignedLdmatrixRowIsAnError) {
  std::vector<uint32_t> out(32);
  const std::string msg = emu_error_of([&] {
    launch_kernel("ldmatrix_misaligned", ldmatrix_misaligned, dim3(1), dim3(32), 0, out.data());
  });
  EXPECT_NE(msg.find("ldmatrix_misaligned"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not 16-byte aligned"), std::string::npos) << msg;
}

// An instruction that fails in the lane completing it leaves the scheduler sound: the next
// launch on the same OS thread computes right. (That lane once stayed queued as if it waited,
// and a later block resumed its stale context.)
TEST_F(TensorCoreTest, AFailedInstructionLeavesTheSchedulerSound) {
  std::vector<float> x(4 * 64), sums(8), expected(8, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 7919) % 101) - 50.0f;
    expected[i / 32] += x[i];
  }
  std::vector<uint32_t> out(32);
  for (int round = 0; round < 5; ++round) {
    configure([&](Settings& s) { s.shuffle_seed.reset(); });
    emu_error_of([&] {
      launch_kernel("ldmatrix_shapes_disagree", ldmatrix_shapes_disagree, dim3(1), dim3(32), 0,
                    out.data());
    });
    for (std::optional<uint64_t> seed : {std::optional<uint64_t>{}, std::optional<uint64_t>{99}}) {
      configure([&](Settings& s) { s.shuffle_seed = seed; });
      std::fill(sums.begin(), sums.end(), 0.0f);
      launch_kernel("warp_sum", warp_sum, dim3(4), dim3(64), 0, x.data(), sums.data());
      EXPECT_EQ(sums, expected) << "round " << round << (seed ? ", shuffled" : "");
    }
  }
}

TEST_F(TensorCoreTest, LdmatrixOfACopyNotWaitedForIsAnErrorNamingTheCopy) {
  std::vector<uint16_t> g(64, 1);
  std::vector<uint32_t> out(32);
  const std::string msg = emu_error_of([&] {
    launch_kernel("ldmatrix_before_wait", ldmatrix_before_wait, dim3(1), dim3(32), 0, g.data(),
                  out.data());
  });
  EXPECT_NE(msg.find("has not written yet"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cp.async at"), std::string::npos) << msg;
}

TEST_F(TensorCoreTest, WaitGroupLandsTheOldestGroupsOnly) {
  std::vector<uint32_t> g(12);
  for (int i = 0; i < 12; ++i) g[i] = 100 + i;
  std::vector<uint32_t> out(16, 0);
  launch_kernel("copy_groups", copy_groups, dim3(1), dim3(1), 0, g.data(), out.data());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i], 100u + i) << "first group, word " << i;
    EXPECT_EQ(out[4 + i], 0xFFFFFFFFu) << "second group still in flight reads poison, word " << i;
    EXPECT_EQ(out[8 + i], 104u + i) << "second group after wait_group 0, word " << i;
    EXPECT_EQ(out[12 + i], 0u) << "zero-filled copy, word " << i;
  }
}

TEST_F(TensorCoreTest, AnEmptyGroupCountsAmongTheMostRecent) {
  std::vector<uint32_t> g = {7, 8, 9, 10}, out(4, 0);
  launch_kernel("copy_then_empty_group", copy_then_empty_group, dim3(1), dim3(1), 0, g.data(),
                out.data());
  EXPECT_EQ(out, g);  // wait_group 1 leaves only the empty group pending
}

TEST_F(TensorCoreTest, ExitingWithACopyNeverWaitedForIsAnError) {
  std::vector<uint32_t> g(4, 5), out(1);
  const std::string msg = emu_error_of([&] {
    launch_kernel("copy_never_waited", copy_never_waited, dim3(1), dim3(1), 0, g.data(),
                  out.data());
  });
  EXPECT_NE(msg.find("never waited for"), std::string::npos) << msg;
}

}  // namespace
}  // namespace glass::emu::testing
