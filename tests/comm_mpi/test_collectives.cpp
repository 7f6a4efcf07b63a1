// All-reduce and broadcast of known data between the ranks, on cpu (mpi) and emu (emulated NCCL):
// exact expected values for sum and average, odd sizes, several tensors queued back to back.
#include <gtest/gtest.h>

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

TEST(Collectives, EveryRankFindsAConfigMismatch) {
  comm::Communicator& c = testing::communicator(kCPU);
  comm::check_same_on_all_ranks(c, "the flags", "lr 0.1");  // the same everywhere: passes
  const std::string err = testing::error_of(
      [&] { comm::check_same_on_all_ranks(c, "the flags", c.rank() == 1 ? "lr 0.2" : "lr 0.1"); });
  EXPECT_TRUE(testing::contains_all(err, {"the flags differs between ranks", "1 of"})) << err;
}

}  // namespace
}  // namespace glass
