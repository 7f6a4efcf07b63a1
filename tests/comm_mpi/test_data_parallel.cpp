// Data-parallel training in 2 ranks against one process: after k steps the replicas are
// bit-identical, and equal (to float tolerance) to one process training on the combined batch,
// on cpu (mpi) and on emu (emulated NCCL), with several buckets and with gradient accumulation.
// And the trace of a step: bucket all-reduces on the comm lane overlapping backward.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#if defined(GLASS_CUDA_RUNTIME_EMU)
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <string_view>

#include "comm_mpi_testing.h"
#include "tests/testing.h"
#include "tests/train/cuda_graph_testing.h"
#include "tests/train/train_testing.h"

namespace glass {
namespace {

train::TrainOptions options(const char* device) {
  train::TrainOptions o = testing::tiny_options();
  o.device = device;
  o.dropout = 0;  // dropout masks are drawn per rank: not comparable with one process
  o.batch = 4;
  o.steps = 3;
  o.comm_bucket_mb = 0.01;  // ~2600 floats: several buckets for this model
  o.comm_timeout_s = 60;
  return o;
}

std::vector<float> weights(const train::Trainer& t) {
  std::vector<float> all;
  for (const auto& [name, p] : t.model().named_parameters()) {
    const std::vector<float> v = to_vector<float>(to_device(p, kCPU));
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

std::vector<float> train_weights(const train::TrainOptions& o) {
  train::Trainer t(o);
  while (t.step() < o.steps) t.train_step();
  return weights(t);
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void expect_replicas_match_one_process(train::TrainOptions o, int64_t grad_accum) {
  o.grad_accum = grad_accum;
  train::Trainer t(o);
  ASSERT_EQ(t.communicator().size(), 2);
  ASSERT_NE(t.data_parallel(), nullptr);
  EXPECT_GE(t.data_parallel()->buckets().size(), 3u);
  while (t.step() < o.steps) t.train_step();
  const std::vector<float> replica = weights(t);
  EXPECT_EQ(testing::ranks_differing_from_root(t.communicator(), replica), 0);

  // One process (this one, alone) on the whole batch: k micro-steps of --batch rows.
  o.comm_backend = "local";
  const std::vector<float> alone = train_weights(o);
  EXPECT_TRUE(testing::all_close(as_double(replica), as_double(alone), 2e-5, 1e-6));
  // Each rank really saw only half the rows: alone on half the batch trains elsewhere.
  o.batch /= 2;
  EXPECT_FALSE(testing::all_close(as_double(train_weights(o)), as_double(alone), 2e-5, 1e-6));
}

TEST(DataParallel, ReplicasAreIdenticalAndMatchOneProcessOnCpu) {
  expect_replicas_match_one_process(options("cpu"), 1);
}

TEST(DataParallel, ReplicasAreIdenticalAndMatchOneProcessOnEmu) {
  expect_replicas_match_one_process(options("emu"), 1);
}

#if defined(GLASS_CUDA_RUNTIME_EMU)
// cuda on the emulated CUDA runtime (GLASS_EMU_GPUS=2, tests/CMakeLists.txt): one GPU per rank,
// each communicator's stream on its rank's GPU, NCCL's collectives queued on that stream and run
// asynchronously (with seeded delays), and still the same weights as one process.
// In f32, where one process on the whole batch must agree within f32 rounding; bf16 below.
TEST(DataParallel, ReplicasAreIdenticalAndMatchOneProcessOnCuda) {
  train::TrainOptions o = options("cuda");
  o.dtype = "f32";
  {
    train::Trainer t(o);
    ASSERT_EQ(t.communicator().device().index, t.communicator().rank());
    int gpu = -1;
    ASSERT_EQ(
        cudaStreamGetDevice(static_cast<cudaStream_t>(t.communicator().stream().native()), &gpu),
        cudaSuccess);
    EXPECT_EQ(gpu, t.communicator().rank());
  }
  expect_replicas_match_one_process(o, 1);
}

// bf16, cuda's default, on two emulated GPUs: the replicas stay bit-identical and the loss
// finite. This failed with the emulated cuBLAS running bf16 GEMMs at the call instead of in stream
// order (a NaN loss at step 1; engine/cuda/README.md).
TEST(DataParallel, Bf16ReplicasAreIdenticalAndFiniteOnCuda) {
  train::TrainOptions o = options("cuda");
  o.dtype = "bf16";
  train::Trainer t(o);
  ASSERT_EQ(t.communicator().size(), 2);
  while (t.step() < o.steps) EXPECT_TRUE(std::isfinite(t.train_step().loss));
  EXPECT_EQ(testing::ranks_differing_from_root(t.communicator(), weights(t)), 0);
}

// --cuda-graph with data parallelism (comm/data_parallel.h): every rank captures its step, the
// bucket all-reduces on the communicator's stream forked into the capture and joined back before
// the optimizer, and replays it. 5 steps (clipping every step) equal the eager data-parallel run
// bit for bit on each rank (losses, norms, weights), the replicas stay identical, and the trace of
// replayed step 3 shows every kernel of the eager step 3 as a graph launch, each bucket's
// all-reduce among them, on the comm lane. Before the all-reduces could be captured, the Trainer
// refused --cuda-graph with more than one rank; without that refusal the capture failed at the
// host's wait for the all-reduces (Communicator::synchronize inside the capture).
void expect_data_parallel_replays_equal_the_eager_run(int64_t grad_accum) {
  const auto two_ranks = [grad_accum](train::TrainOptions& o) {
    o.batch = 4;
    o.comm_bucket_mb = 0.01;  // several buckets
    o.comm_timeout_s = 60;
    o.grad_accum = grad_accum;
  };
  const testing::TrainedRun eager = testing::train(false, 0.05, two_ranks);
  // GPU 0 current, as in a fresh process, whichever GPU is this rank's: the graph must still be
  // made on the rank's GPU (it was made on the current one: cudaGraphLaunch failed on rank 1).
  cuda::require_device(0);
  const testing::TrainedRun replayed = testing::train(true, 0.05, two_ranks);
  testing::expect_same_run(eager, replayed);
  EXPECT_EQ(replayed.replays, 4);
  EXPECT_NE(replayed.losses[1], replayed.losses[4]);
  std::vector<float> flat;
  for (const std::vector<float>& w : replayed.weights) flat.insert(flat.end(), w.begin(), w.end());
  EXPECT_EQ(testing::ranks_differing_from_root(testing::communicator(kCPU), flat), 0);

  // Step 3: the eager step's launches (less AdamW's scalar copy, staged before a replay) and the
  // replay's graph launches, in order, the all-reduces apart (the eager ones run on the comm
  // stream's worker, so their place among the compute launches varies).
  auto is_bucket_reduce = [](const LaunchInfo& i, const std::string& op) {
    return std::string_view(i.kernel) == "nccl_all_reduce" && op.starts_with("ddp_bucket_");
  };
  std::vector<std::string> eager_kernels, graph_kernels, eager_reduces, graph_reduces;
  for (size_t k = 0; k < eager.step3.size(); ++k) {
    const LaunchInfo& i = eager.step3[k];
    const std::string& op = eager.step3_ops[k];
    if (is_bucket_reduce(i, op))
      eager_reduces.push_back(op);
    else if (i.stream == 0 && !(op == "adamw" && std::string_view(i.kernel) == "copy"))
      eager_kernels.emplace_back(i.kernel);
  }
  std::set<int> reduce_lanes, compute_lanes;
  for (size_t k = 0; k < replayed.step3.size(); ++k) {
    const LaunchInfo& i = replayed.step3[k];
    if (i.graph == 0) continue;
    if (is_bucket_reduce(i, replayed.step3_ops[k])) {
      graph_reduces.push_back(replayed.step3_ops[k]);
      reduce_lanes.insert(i.stream);
      EXPECT_EQ(i.phase, Phase::comm);
    } else {
      graph_kernels.emplace_back(i.kernel);
      compute_lanes.insert(i.stream);
    }
  }
  EXPECT_GT(graph_kernels.size(), 20u);
  EXPECT_EQ(graph_kernels, eager_kernels);
  std::sort(eager_reduces.begin(), eager_reduces.end());
  std::sort(graph_reduces.begin(), graph_reduces.end());
  EXPECT_GE(eager_reduces.size(), 3u);
  EXPECT_EQ(graph_reduces, eager_reduces);  // each bucket once
  ASSERT_EQ(reduce_lanes.size(), 1u);       // the communicator's stream
  ASSERT_EQ(compute_lanes.size(), 1u);      // the graph's stream
  EXPECT_NE(*reduce_lanes.begin(), *compute_lanes.begin());
}

TEST(DataParallel, CudaGraphReplaysEqualTheEagerRunBitForBitOnCuda) {
  expect_data_parallel_replays_equal_the_eager_run(1);
}

// --grad-accum 2: the all-reduces only after the second micro-step, in the graph as eagerly.
TEST(DataParallel, CudaGraphWithGradAccumReducesOnceOnCuda) {
  expect_data_parallel_replays_equal_the_eager_run(2);
}

// The time-out that bounds an eager step's wait for the all-reduces bounds a replayed step too:
// rank 1 stops answering after step 2 (it never replays step 3), and rank 0's replay of step 3,
// stuck in the captured all-reduce, ends after --comm-timeout with an error naming rank 0 (its
// host waits for the replay where it reads the step's result, Trainer::train_step), never a hang.
// Rank 0 leaves its collective abandoned: that communicator is aborted, the others go on.
TEST(DataParallel, AReplayedStepTimesOutWhenARankStopsAnsweringOnCuda) {
  train::TrainOptions o = testing::graph_options(true, 0);
  o.batch = 4;
  o.steps = 3;
  o.comm_timeout_s = 2;
  comm::Communicator& world = testing::communicator(kCPU);
  {
    train::Trainer t(o);
    t.train_step();  // eager
    t.train_step();  // captured, replayed
    ASSERT_NE(t.graph(), nullptr);
    ASSERT_TRUE(t.graph()->captured());
    if (t.communicator().rank() == 0) {
      const auto start = std::chrono::steady_clock::now();
      std::string message;
      try {
        t.train_step();
      } catch (const Error& e) {
        message = e.what();
      }
      EXPECT_TRUE(testing::contains_all(
          message, {"nccl backend, rank 0 of 2: step 3: the replayed CUDA graph",
                    "did not finish within 2 s: another rank died or is stuck"}))
          << message;
      EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                30);
    }
    world.barrier();
  }
  world.barrier();
}
#endif

TEST(DataParallel, GradAccumReducesOnceAndMatchesOneProcess) {
  expect_replicas_match_one_process(options("cpu"), 2);
}

TEST(DataParallel, RankZeroCheckpointsAndEveryRankResumesBitExactly) {
  train::TrainOptions o = options("cpu");
  o.steps = 4;
  o.dropout = 0.1;  // the restored RNG state matters too
  const std::vector<float> straight = train_weights(o);

  // The ranks of one job share a parent (mpirun's daemon), hence a directory name.
  const std::string dir =
      std::filesystem::temp_directory_path() / ("glass_comm_ckpt_" + std::to_string(getppid()));
  comm::Communicator& c = testing::communicator(kCPU);
  if (c.rank() == 0) std::filesystem::remove_all(dir);
  c.barrier();
  o.steps = 2;
  o.checkpoint_dir = dir;
  train::Trainer(o).run();  // rank 0 writes the checkpoint after step 2
  c.barrier();
  o.steps = 4;
  o.resume = dir;
  train::Trainer resumed(o);
  EXPECT_EQ(resumed.step(), 2);
  while (resumed.step() < o.steps) resumed.train_step();
  EXPECT_EQ(weights(resumed), straight);
  c.barrier();
  if (c.rank() == 0) std::filesystem::remove_all(dir);
}

TEST(DataParallel, BucketAllReducesOverlapBackwardOnTheCommLane) {
  train::TrainOptions o = options("emu");
  o.n_embd = 32;  // a backward long enough to overlap
  o.steps = 2;
  train::Trainer t(o);
  t.train_step();  // warm up (first-touch allocations)
  testing::LaunchLog log;
  t.train_step();
  t.communicator().synchronize();
  const int comm_lane = t.communicator().stream().id();
  std::vector<LaunchRecord> reduces, backward;
  for (const LaunchRecord& r : log.records) {
    if (std::string_view(r.info.kernel) == "nccl_all_reduce" &&
        std::string_view(r.info.op).starts_with("ddp_bucket_"))
      reduces.push_back(r);
    if (r.info.phase == Phase::backward) backward.push_back(r);
  }
  // The bucket schedule: one all-reduce per bucket, on the comm lane, phase comm.
  const size_t buckets = t.data_parallel()->buckets().size();
  ASSERT_EQ(reduces.size(), buckets);
  std::vector<std::string> names;
  for (const LaunchRecord& r : reduces) {
    EXPECT_EQ(r.info.stream, comm_lane);
    EXPECT_EQ(r.info.phase, Phase::comm);
    names.emplace_back(r.info.op);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
  // Overlap: some all-reduce started before backward's last launch ended, while the main lane
  // was still running backward kernels.
  ASSERT_FALSE(backward.empty());
  const double backward_end = backward.back().end_us;
  int overlapping = 0;
  for (const LaunchRecord& r : reduces)
    for (const LaunchRecord& b : backward)
      if (b.info.stream == 0 && r.start_us < b.end_us && b.start_us < r.end_us) ++overlapping;
  EXPECT_LT(reduces.front().start_us, backward_end);
  EXPECT_GT(overlapping, 0) << "no backward launch ran while a bucket was being all-reduced";
}

}  // namespace
}  // namespace glass
