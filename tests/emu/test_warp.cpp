// Warp shuffles and votes against the rules of the CUDA C++ Programming Guide ("Warp Shuffle
// Functions", "Warp Vote Functions").
#include <vector>

#include "engine/emu/launch.h"
#include "tests/emu/emu_test.h"
#include "tests/emu/kernels.h"

namespace glass::emu::testing {
namespace {

using WarpTest = EmuTest;

enum Mode { kIndex = 0, kUp = 1, kDown = 2, kXor = 3 };

// What lane `lane` receives when every lane offers 1000 + its thread index, following the
// guide's prose: a warp splits into segments of `width` lanes that each behave as a warp of
// their own; an index is taken modulo width; up/down leave the lanes alone whose source would
// leave the segment; xor may read from earlier segments but not from later ones.
int expected_shuffle(Mode mode, int thread, int arg, int width) {
  const int lane = thread % 32, warp_base = thread - lane;
  const int segment = lane / width * width, logical = lane - segment;
  int src = lane;
  switch (mode) {
    case kIndex:
      src = segment + ((arg % width) + width) % width;
      break;
    case kUp:
      src = logical >= arg ? lane - arg : lane;
      break;
    case kDown:
      src = logical + arg < width ? lane + arg : lane;
      break;
    case kXor:
      src = (lane ^ arg) < segment + width ? lane ^ arg : lane;
      break;
  }
  return 1000 + warp_base + src;
}

std::vector<int> run_shuffle(Mode mode, int arg, int width, int threads) {
  std::vector<int> out(threads, -1);
  launch_kernel("shuffle_lane_ids", shuffle_lane_ids, dim3(1), dim3(threads), 0, out.data(),
                static_cast<int>(mode), arg, width);
  return out;
}

TEST_F(WarpTest, ShufflesFollowTheGuideForEveryWidth) {
  const std::vector<std::pair<Mode, std::vector<int>>> cases = {
      {kIndex, {0, 3, 7, -1, 37}}, {kUp, {1, 2, 5}}, {kDown, {1, 3, 6}}, {kXor, {1, 5, 16, 31}}};
  for (int width : {32, 16, 8, 4, 2, 1})
    for (const auto& [mode, args] : cases)
      for (int arg : args) {
        const std::vector<int> out = run_shuffle(mode, arg, width, 64);
        for (int t = 0; t < 64; ++t)
          ASSERT_EQ(out[t], expected_shuffle(mode, t, arg, width))
              << "mode " << mode << " arg " << arg << " width " << width << " thread " << t;
      }
}

TEST_F(WarpTest, ShuffleSpotChecks) {
  std::vector<int> up = run_shuffle(kUp, 2, 8, 32);
  EXPECT_EQ(up[0], 1000);  // lowest lanes of a segment keep their value
  EXPECT_EQ(up[2], 1000);
  EXPECT_EQ(up[9], 1009);  // lane 9 is lane 1 of its segment
  EXPECT_EQ(up[10], 1008);
  std::vector<int> x = run_shuffle(kXor, 5, 4, 32);
  EXPECT_EQ(x[4], 1001);  // 4 ^ 5 = 1 lies in an earlier segment: allowed
  EXPECT_EQ(x[1], 1001);  // 1 ^ 5 = 4 lies in a later segment: own value
  std::vector<int> idx = run_shuffle(kIndex, -1, 8, 32);
  EXPECT_EQ(idx[17], 1023);  // -1 modulo 8 = lane 7 of segment 16..23
}

TEST_F(WarpTest, SourceLaneMissingFromPartialWarpGivesOwnValue) {
  // 48 threads: the second warp has lanes 0..15 only.
  const std::vector<int> out = run_shuffle(kDown, 16, 32, 48);
  for (int t = 0; t < 16; ++t) EXPECT_EQ(out[t], 1000 + t + 16);
  for (int t = 32; t < 48; ++t) EXPECT_EQ(out[t], 1000 + t) << "thread " << t;
}

TEST_F(WarpTest, WarpReduction) {
  std::vector<float> x(4 * 64), sums(8, 0.0f), expected(8, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>((i * 7919) % 101) - 50.0f;
    expected[i / 32] += x[i];
  }
  launch_kernel("warp_sum", warp_sum, dim3(4), dim3(64), 0, x.data(), sums.data());
  EXPECT_EQ(sums, expected);
  configure([](Settings& s) { s.shuffle_seed = 99; });
  std::fill(sums.begin(), sums.end(), 0.0f);
  launch_kernel("warp_sum", warp_sum, dim3(4), dim3(64), 0, x.data(), sums.data());
  EXPECT_EQ(sums, expected);
}

TEST_F(WarpTest, ShufflesMoveEveryValueType) {
  std::vector<double> d(32);
  std::vector<long long> ll(32);
  std::vector<float> f(32);
  std::vector<unsigned> u(32);
  std::vector<__nv_bfloat16> h(32);
  launch_kernel("shuffle_types", shuffle_types, dim3(1), dim3(32), 0, d.data(), ll.data(), f.data(),
                u.data(), h.data());
  for (int lane = 0; lane < 32; ++lane) {
    const int src = lane ^ 1;
    EXPECT_EQ(d[lane], 1e10 + 0.25 * src);
    EXPECT_EQ(ll[lane], (1LL << 40) + src);
    EXPECT_EQ(f[lane], -0.5f * src);
    EXPECT_EQ(u[lane], 0x80000000u + src);
    EXPECT_EQ(__bfloat162float(h[lane]), static_cast<float>(src));
  }
}

TEST_F(WarpTest, BallotAnyAllInFullAndPartialWarps) {
  std::vector<unsigned> ballot(48);
  std::vector<int> any(48), all(48);
  launch_kernel("warp_votes", warp_votes, dim3(1), dim3(48), 0, ballot.data(), any.data(),
                all.data());
  unsigned warp0 = 0;
  for (int lane = 0; lane < 32; lane += 3) warp0 |= 1u << lane;
  // Threads 33, 36, ..., 45 are lanes 1, 4, ..., 13 of the second warp.
  const unsigned warp1 = (1u << 1) | (1u << 4) | (1u << 7) | (1u << 10) | (1u << 13);
  for (int t = 0; t < 48; ++t) {
    EXPECT_EQ(ballot[t], t < 32 ? warp0 : warp1) << "thread " << t;
    EXPECT_EQ(any[t], t < 32 ? 0 : 1) << "thread " << t;
    EXPECT_EQ(all[t], t < 32 ? 1 : 0) << "thread " << t;
  }
}

TEST_F(WarpTest, DisjointMasksShuffleIndependently) {
  std::vector<int> out(32, -1);
  launch_kernel("disjoint_mask_shuffles", disjoint_mask_shuffles, dim3(1), dim3(32), 0, out.data());
  for (int lane = 0; lane < 32; ++lane) {
    const int expected = lane < 15 ? lane + 1 : lane < 17 ? lane : lane - 1;
    EXPECT_EQ(out[lane], expected) << "lane " << lane;
  }
}

TEST_F(WarpTest, LanesMatchByMaskAcrossCallSites) {
  std::vector<int> out(32, -1);
  launch_kernel("shuffle_from_two_sites", shuffle_from_two_sites, dim3(1), dim3(32), 0, out.data());
  for (int lane = 0; lane < 32; ++lane)
    EXPECT_EQ(out[lane], lane < 16 ? lane + 16 + 100 : lane - 16) << "lane " << lane;
}

TEST_F(WarpTest, SyncwarpOrdersSharedMemory) {
  std::vector<int> out(32, -1);
  launch_kernel("warp_sync_exchange", warp_sync_exchange, dim3(1), dim3(32), 0, out.data());
  for (int lane = 0; lane < 32; ++lane) EXPECT_EQ(out[lane], 2 * ((lane + 1) % 32));
}

TEST_F(WarpTest, ShuffleAgainstVoteIsADeadlock) {
  std::vector<int> out(32);
  const std::string msg = emu_error_of([&] {
    launch_kernel("shuffle_and_vote_mixed", shuffle_and_vote_mixed, dim3(1), dim3(32), 0,
                  out.data());
  });
  EXPECT_NE(msg.find("kernel 'shuffle_and_vote_mixed' deadlocked"), std::string::npos) << msg;
  EXPECT_NE(msg.find("16 thread(s) wait at a shuffle with mask 0xffffffff at"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("16 thread(s) wait at a vote with mask 0xffffffff at"), std::string::npos)
      << msg;
}

TEST_F(WarpTest, MaskWithoutTheCallingLaneIsAnError) {
  std::vector<int> out(32);
  const std::string msg = emu_error_of([&] {
    launch_kernel("shuffle_mask_without_caller", shuffle_mask_without_caller, dim3(1), dim3(32), 0,
                  out.data());
  });
  EXPECT_NE(msg.find("kernel 'shuffle_mask_without_caller': thread (0,0,0)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("mask 0x00000002, which does not include the calling lane"), std::string::npos)
      << msg;
}

TEST_F(WarpTest, ActiveMaskNamesTheLanesThatExist) {
  std::vector<unsigned> out(40);
  launch_kernel("active_lanes", active_lanes, dim3(1), dim3(40), 0, out.data());
  for (int t = 0; t < 40; ++t) EXPECT_EQ(out[t], t < 32 ? 0xffffffffu : 0xffu) << "thread " << t;
}

}  // namespace
}  // namespace glass::emu::testing
