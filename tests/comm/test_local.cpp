// The communicator in a world of one (no mpirun): collectives leave the data as it is, run on the
// side stream as `comm` launches, and bad input fails with an error naming the tensor. The batch
// split of data parallelism and the bucket plan, checked by hand.
#include <gtest/gtest.h>

#include "comm/data_parallel.h"
#include "tests/testing.h"
#include "train/distributed.h"

namespace glass {
namespace {

using comm::ReduceOp;
using testing::contains_all;
using testing::error_of;

TEST(LocalCommunicator, CollectivesAreCommLaunchesOnTheSideStreamThatKeepTheData) {
  for (Device d : {kCPU, kEmu}) {
    auto c = comm::make_communicator(d);
    EXPECT_STREQ(c->backend(), "local");
    EXPECT_EQ(c->size(), 1);
    EXPECT_EQ(c->rank(), 0);
    const Tensor t = to_device(testing::rnd({37}, 5, DType::f32), d);
    const std::vector<float> before = to_vector<float>(t);
    testing::LaunchLog log;
    {
      LaunchScope scope("my_op", 7, Phase::other);
      c->all_reduce(t, ReduceOp::avg);
      c->broadcast(t, 0);
      c->reduce_scatter(t, ReduceOp::avg);  // one chunk, this rank's: the data itself
      c->all_gather(t);
      c->synchronize();
    }
    EXPECT_EQ(to_vector<float>(t), before);
    ASSERT_EQ(log.records.size(), 4u);
    EXPECT_STREQ(log.records[0].info.kernel, "local_all_reduce");
    EXPECT_STREQ(log.records[1].info.kernel, "local_broadcast");
    EXPECT_STREQ(log.records[2].info.kernel, "local_reduce_scatter");
    EXPECT_STREQ(log.records[3].info.kernel, "local_all_gather");
    for (const LaunchRecord& r : log.records) {
      EXPECT_EQ(r.info.phase, Phase::comm);
      EXPECT_EQ(r.info.stream, c->stream().id());
      EXPECT_STREQ(r.info.op, "my_op");
      EXPECT_EQ(r.info.node_id, 7);
      EXPECT_EQ(r.info.device, d);
      EXPECT_EQ(r.info.bytes, 0);  // nothing moves in a world of one
    }
    c->barrier();
  }
}

TEST(LocalCommunicator, BadInputNamesTheProblem) {
  auto c = comm::make_communicator(kCPU);
  const Tensor m = zeros({4, 6});
  EXPECT_TRUE(contains_all(error_of([&] { c->all_reduce(to_device(m, kEmu), ReduceOp::sum); }),
                           {"all_reduce", "on emu", "not on the communicator's device cpu"}));
  EXPECT_TRUE(contains_all(error_of([&] { c->all_reduce(transpose(m, 0, 1), ReduceOp::sum); }),
                           {"all_reduce", "not contiguous"}));
  EXPECT_TRUE(contains_all(error_of([&] { c->all_reduce(cast(m, DType::bf16), ReduceOp::sum); }),
                           {"all_reduce", "bf16", "f32, f64 or i32"}));
  EXPECT_TRUE(contains_all(error_of([&] { c->all_reduce(zeros({3}, DType::i32), ReduceOp::avg); }),
                           {"average", "i32"}));
  EXPECT_TRUE(
      contains_all(error_of([&] { c->broadcast(m, 1); }), {"broadcast", "root 1", "world of 1"}));
  EXPECT_TRUE(contains_all(error_of([&] { comm::make_communicator(kCPU, {0.0}); }),
                           {"time-out", "positive"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             comm::make_communicator(kCPU, {1.0, "gloo"});
                           }),
                           {"unknown backend 'gloo'"}));
}

TEST(DataParallelRows, EachRankReadsItsShareOfTheGlobalBatch) {
  const train::RowRange r0 = train::rows_of_rank(12, 0, 3), r2 = train::rows_of_rank(12, 2, 3);
  EXPECT_EQ(r0.begin, 0);
  EXPECT_EQ(r0.end, 4);
  EXPECT_EQ(r2.begin, 8);
  EXPECT_EQ(r2.end, 12);
  EXPECT_TRUE(
      contains_all(error_of([] { train::rows_of_rank(10, 0, 4); }), {"--batch 10", "4 ranks"}));
}

TEST(DataParallelBuckets, ReverseParameterOrderSplitAtTheBucketSize) {
  auto c = comm::make_communicator(kCPU);
  // 5 parameters of 1000, 300, 2000, 100 and 700 floats; a bucket closes once it holds at least
  // 4 KB = 1000 floats (bucket_mb = 4000 / 2^20), so from the back: [700 100 2000] [300 1000].
  NamedTensors params;
  Generator gen(3);
  for (int64_t n : {1000, 300, 2000, 100, 700})
    params.emplace_back(fmt::format("p{}", params.size()), randn({n}, gen).set_requires_grad(true));
  const Tensor tied = params[1].second;
  NamedTensors with_tied = params;
  with_tied.insert(with_tied.begin(), {"tied", tied});  // the same tensor again counts once
  comm::DataParallel ddp(*c, with_tied, 4000.0 / (1 << 20));
  const auto& b = ddp.buckets();
  ASSERT_EQ(b.size(), 2u);
  ASSERT_EQ(b[0].params.size(), 3u);
  EXPECT_TRUE(b[0].params[0].is_same(params[4].second));
  EXPECT_TRUE(b[0].params[2].is_same(params[2].second));
  EXPECT_EQ(b[0].offsets, (std::vector<int64_t>{0, 700, 800}));
  EXPECT_EQ(b[0].flat.numel(), 2800);
  EXPECT_EQ(b[1].name, "ddp_bucket_1");
  ASSERT_EQ(b[1].params.size(), 2u);
  EXPECT_TRUE(b[1].params[0].is_same(tied));
  EXPECT_EQ(b[1].offsets, (std::vector<int64_t>{0, 300}));

  // A backward that reaches every parameter fires both buckets from the grad-ready hooks; the
  // gate writes the (one-rank) averages back: the gradients themselves.
  Tensor loss = sum(params[0].second);
  for (size_t i = 1; i < 5; ++i) loss = loss + sum(params[i].second * params[i].second);
  testing::LaunchLog log;
  backward(loss);
  ddp.finish_gradient_sync();
  std::vector<std::string> reduced;
  for (const LaunchInfo& l : log.launches("local_all_reduce")) reduced.emplace_back(l.op);
  EXPECT_EQ(reduced, (std::vector<std::string>{"ddp_bucket_0", "ddp_bucket_1"}));
  // Bucket 0 (the last parameters) was copied in and started from a hook, inside backward.
  uint64_t first_copy_in = UINT64_MAX, last_backward = 0;
  for (const LaunchRecord& r : log.records) {
    if (r.info.phase == Phase::backward) last_backward = std::max(last_backward, r.seq);
    if (std::string_view(r.info.op) == "ddp_bucket_0")
      first_copy_in = std::min(first_copy_in, r.seq);
  }
  EXPECT_LT(first_copy_in, last_backward);
  EXPECT_EQ(to_vector<float>(params[0].second.grad()), std::vector<float>(1000, 1.0f));
  EXPECT_TRUE(testing::all_close(params[2].second.grad(), params[2].second * 2.0, 0, 0));
  EXPECT_TRUE(contains_all(error_of([&] { comm::DataParallel(*c, params, 0); }),
                           {"bucket size", "positive"}));
}

}  // namespace
}  // namespace glass
