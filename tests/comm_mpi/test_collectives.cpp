// All-reduce and broadcast of known data between the ranks, on cpu (mpi) and emu (emulated NCCL):
// exact expected values for sum and average, odd sizes, several tensors queued back to back. The
// reduce-scatter and all-gather of ZeRO-1: exact values, and each element of a reduce-scatter
// bit-identical to the all-reduce's on values whose sums round.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "autograd/ops.h"
#include "comm/data_parallel.h"
#include "comm_mpi_testing.h"
#include "engine/launch.h"
#include "tests/testing.h"

namespace glass {
namespace {

using comm::ReduceOp;

// Rank r holds x[i] = 1000 r + i + 0.25: every sum over ranks is exact in f32 for these sizes.
std::vector<float> rank_data(int rank, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 1000.0f * rank + i + 0.25f;
  return v;
}

TEST(Collectives, AllReduceSumAndAverageGiveTheExactValues) {
  for (Device d : {kCPU, kEmu}) {
    comm::Communicator& c = testing::communicator(d);
    const int n = c.size();
    ASSERT_GE(n, 2) << "run under mpirun -np 2";
    EXPECT_STREQ(c.backend(), d == kCPU ? "mpi" : "nccl");
    const std::vector<int64_t> sizes{1, 7, 1000, 4099};
    std::vector<Tensor> sums, avgs;
    testing::LaunchLog log;
    for (int64_t size : sizes) {  // all queued before one synchronize: several buckets
      sums.push_back(from_vector(rank_data(c.rank(), size), {size}, d));
      avgs.push_back(from_vector(rank_data(c.rank(), size), {size}, d));
      c.all_reduce(sums.back(), ReduceOp::sum);
      c.all_reduce(avgs.back(), ReduceOp::avg);
    }
    c.synchronize();
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<float> sum(static_cast<size_t>(sizes[k]), 0.0f);
      for (int r = 0; r < n; ++r) {
        const std::vector<float> v = rank_data(r, sizes[k]);
        for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
      }
      std::vector<float> avg(sum);
      for (float& a : avg) a /= static_cast<float>(n);
      EXPECT_EQ(to_vector<float>(sums[k]), sum) << d.str() << " size " << sizes[k];
      EXPECT_EQ(to_vector<float>(avgs[k]), avg) << d.str() << " size " << sizes[k];
    }
    const char* kernel = d == kCPU ? "mpi_all_reduce" : "nccl_all_reduce";
    ASSERT_EQ(log.launches(kernel).size(), 2 * sizes.size());
    const LaunchInfo last = log.launches(kernel).back();
    EXPECT_EQ(last.phase, Phase::comm);
    EXPECT_EQ(last.stream, c.stream().id());
    // Ring all-reduce traffic: 2 (N-1)/N of the buffer.
    EXPECT_DOUBLE_EQ(last.bytes, 2.0 * (n - 1) / n * 4099 * 4);
  }
}

TEST(Collectives, BroadcastFromEveryRootAndIntegerSums) {
  for (Device d : {kCPU, kEmu}) {
    comm::Communicator& c = testing::communicator(d);
    for (int root = 0; root < c.size(); ++root) {
      const Tensor t = from_vector(rank_data(c.rank(), 13), {13}, d);
      c.broadcast(t, root);
      c.synchronize();
      EXPECT_EQ(to_vector<float>(t), rank_data(root, 13)) << d.str() << " root " << root;
    }
    const Tensor ids = from_vector(std::vector<int32_t>{c.rank(), -3}, {2}, d);
    c.all_reduce(ids, ReduceOp::sum);
    c.synchronize();
    EXPECT_EQ(to_vector<int32_t>(ids),
              (std::vector<int32_t>{c.size() * (c.size() - 1) / 2, -3 * c.size()}));
    c.barrier();
  }
}

// Values whose sums round in f32 (not exactly representable), different on every rank.
std::vector<float> rounding_data(int rank, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i) + 1.3f * rank) / 3.0f;
  return v;
}

TEST(Collectives, ReduceScatterGivesEachRankItsChunkOfTheAllReduceBitForBit) {
  for (Device d : {kCPU, kEmu}) {
    comm::Communicator& c = testing::communicator(d);
    const int n = c.size();
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      for (int64_t chunk : {1, 5, 1031}) {
        const int64_t size = chunk * n;
        const Tensor all = from_vector(rounding_data(c.rank(), size), {size}, d);
        const Tensor scattered = from_vector(rounding_data(c.rank(), size), {size}, d);
        testing::LaunchLog log;
        c.all_reduce(all, op);
        c.reduce_scatter(scattered, op);
        c.synchronize();
        const std::vector<float> a = to_vector<float>(all), s = to_vector<float>(scattered);
        const int64_t mine = c.rank() * chunk;
        EXPECT_EQ(std::memcmp(a.data() + mine, s.data() + mine, chunk * sizeof(float)), 0)
            << d.str() << " chunk " << chunk;
        // The other chunks of the input are not this rank's: only its own is defined.
        const char* kernel = d == kCPU ? "mpi_reduce_scatter" : "nccl_reduce_scatter";
        ASSERT_EQ(log.launches(kernel).size(), 1u);
        EXPECT_EQ(log.launches(kernel)[0].phase, Phase::comm);
        EXPECT_DOUBLE_EQ(log.launches(kernel)[0].bytes, (n - 1.0) / n * size * 4);
      }
    }
    // Exact values: rank_data's sums are exact.
    const Tensor t = from_vector(rank_data(c.rank(), 6 * n), {6 * n}, d);
    c.reduce_scatter(t, ReduceOp::sum);
    c.synchronize();
    const std::vector<float> got = to_vector<float>(t);
    for (int64_t i = c.rank() * 6; i < (c.rank() + 1) * 6; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r) sum += rank_data(r, 6 * n)[static_cast<size_t>(i)];
      EXPECT_EQ(got[static_cast<size_t>(i)], sum) << d.str() << " element " << i;
    }
  }
}

TEST(Collectives, AllGatherGivesEveryRankEveryChunk) {
  for (Device d : {kCPU, kEmu}) {
    comm::Communicator& c = testing::communicator(d);
    const int n = c.size();
    for (int64_t chunk : {1, 7, 2053}) {
      // Rank r fills only its own chunk; the rest is garbage that must be overwritten.
      std::vector<float> mine(static_cast<size_t>(chunk * n), -1.0f);
      const std::vector<float> data = rank_data(c.rank(), chunk * n);
      for (int64_t i = c.rank() * chunk; i < (c.rank() + 1) * chunk; ++i)
        mine[static_cast<size_t>(i)] = data[static_cast<size_t>(i)];
      const Tensor t = from_vector(mine, {chunk * n}, d);
      c.all_gather(t);
      c.synchronize();
      std::vector<float> want(static_cast<size_t>(chunk * n));
      for (int r = 0; r < n; ++r) {
        const std::vector<float> theirs = rank_data(r, chunk * n);
        for (int64_t i = r * chunk; i < (r + 1) * chunk; ++i)
          want[static_cast<size_t>(i)] = theirs[static_cast<size_t>(i)];
      }
      EXPECT_EQ(to_vector<float>(t), want) << d.str() << " chunk " << chunk;
    }
  }
}

TEST(Collectives, ReduceScatterAndAllGatherRefuseSizesThatDoNotSplitIntoChunks) {
  comm::Communicator& c = testing::communicator(kCPU);
  const Tensor odd = zeros({2 * c.size() + 1}, DType::f32, kCPU);
  EXPECT_NE(testing::error_of([&] {
              c.reduce_scatter(odd, ReduceOp::avg);
            }).find("not a multiple of the world size"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { c.all_gather(odd); }).find("not a multiple of the world size"),
            std::string::npos);
  const Tensor ints = zeros({2 * c.size()}, DType::i32, kCPU);
  EXPECT_NE(testing::error_of([&] { c.reduce_scatter(ints, ReduceOp::avg); }).find("would round"),
            std::string::npos);
}

TEST(Collectives, EveryRankFindsAConfigMismatch) {
  comm::Communicator& c = testing::communicator(kCPU);
  comm::check_same_on_all_ranks(c, "the flags", "lr 0.1");  // the same everywhere: passes
  const std::string err = testing::error_of(
      [&] { comm::check_same_on_all_ranks(c, "the flags", c.rank() == 1 ? "lr 0.2" : "lr 0.1"); });
  EXPECT_TRUE(testing::contains_all(err, {"the flags differs between ranks", "1 of"})) << err;
}

}  // namespace
}  // namespace glass
