// Data-parallel training in 2 ranks against one process: after k steps the replicas are
// bit-identical, and equal (to float tolerance) to one process training on the combined batch,
// on cpu (mpi) and on emu (emulated NCCL), with several buckets and with gradient accumulation.
// And the trace of a step: bucket all-reduces on the comm lane overlapping backward. ZeRO-1
// (--zero 1, comm/zero_adamw.h) against the unsharded run of the same 2 ranks: bit-identical
// weights with clipping on, on cpu (mpi), emu and cuda (emulated NCCL), f32 and bf16; its
// consolidated checkpoints and saved weights. The step explorer's gradient norms under data
// parallelism: the run trains the same bits with --report as without.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#if defined(GLASS_CUDA_RUNTIME_EMU)
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string_view>

#include "comm/zero_adamw.h"
#include "comm_mpi_testing.h"
#include "engine/allocator.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/testing.h"
#include "tests/train/cuda_graph_testing.h"
#include "tests/train/report_testing.h"
#include "tests/train/train_testing.h"
#include "train/gpt_cost.h"
#include "train/preflight.h"

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

// The f32 master weights, whole (collective under --zero 1 with bf16: every rank calls it).
std::vector<float> weights(const train::Trainer& t) {
  std::vector<float> all;
  for (const auto& [name, p] : t.master_weights()) {
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
  o.comm_timeout_s = 60;  // steps 1 and 2 wait for the other rank as long as a loaded CI needs
  comm::Communicator& world = testing::communicator(kCPU);
  {
    train::Trainer t(o);
    t.train_step();  // eager
    t.train_step();  // captured, replayed
    ASSERT_NE(t.graph(), nullptr);
    ASSERT_TRUE(t.graph()->captured());
    t.communicator().set_timeout(2);  // step 3: rank 1 never comes
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

// The step explorer's gradient norms under data parallelism (TrainStep::tape_with_grad_norms):
// each rank measures them on a pass of its own with the gradient sync paused (no bucket
// all-reduce or ZeRO-1 reduce-scatter starts, so no rank waits for the others) and drops that
// pass's gradients, so the job trains the same bits with --report as without, on every rank.
// Rank 0's report has a positive norm on every tape node; its loss node's is 1 / grad_accum (the
// step's backward of loss / k), and the report says whose norms they are. Dropout on: each rank's
// pass puts its generator back. --grad-accum 2: the pass (the first micro-step, loss / 2) has other
// gradients than the step, so a pass that left its reduced gradients in the buckets would show
// (with one micro-step they are the step's own, bit for bit).
void expect_report_leaves_the_job_as_it_was(train::TrainOptions o) {
  o.steps = 3;
  o.dropout = 0.1;
  o.grad_accum = 2;
  const std::vector<float> plain = train_weights(o);
  o.report = (std::filesystem::temp_directory_path() /
              ("glass_comm_report_" + std::to_string(getpid()) + ".html"))
                 .string();
  train::Trainer shown(o);
  shown.run();
  EXPECT_EQ(weights(shown), plain) << o.device << " --zero " << o.zero << " " << o.dtype;
  EXPECT_EQ(testing::ranks_differing_from_root(shown.communicator(), weights(shown)), 0);
  if (shown.communicator().rank() != 0) return;
  const nlohmann::json d = testing::report_json(testing::file_bytes(o.report));
  std::filesystem::remove(o.report);
  ASSERT_FALSE(d["tape"].empty());
  for (const auto& n : d["tape"]) {
    ASSERT_TRUE(n["grad_norm"].is_number()) << n;
    EXPECT_GT(n["grad_norm"].get<double>(), 0) << n;
  }
  EXPECT_NEAR(d["tape"].back()["grad_norm"].get<double>(), 1.0 / static_cast<double>(o.grad_accum),
              1e-12);
  EXPECT_NE(d["notes"].dump().find("gradient norms: of rank 0's loss"), std::string::npos)
      << d["notes"];
}

TEST(DataParallel, ReportGradientNormsLeaveTheTrainingBitIdenticalOnCpu) {
  train::TrainOptions o = options("cpu");
  expect_report_leaves_the_job_as_it_was(o);
  o.zero = 1;
  expect_report_leaves_the_job_as_it_was(o);
}

TEST(DataParallel, ReportGradientNormsLeaveTheTrainingBitIdenticalOnEmu) {
  train::TrainOptions o = options("emu");
  expect_report_leaves_the_job_as_it_was(o);
  o.zero = 1;
  expect_report_leaves_the_job_as_it_was(o);
}

#if defined(GLASS_CUDA_RUNTIME_EMU)
// Two emulated GPUs: f32, and bf16 under ZeRO-1 (the sharded f32 masters, the bf16 all-gather).
TEST(DataParallel, ReportGradientNormsLeaveTheTrainingBitIdenticalOnCuda) {
  train::TrainOptions o = options("cuda");
  o.dtype = "f32";
  expect_report_leaves_the_job_as_it_was(o);
  o.dtype = "bf16";
  o.zero = 1;
  expect_report_leaves_the_job_as_it_was(o);
}
#endif

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

// --zero 1 against --zero 0 on the same ranks: every step clips (the bound is below every norm),
// the norms agree (to f64 rounding: summed in another order, comm/zero_adamw.h), and the weights
// are bit-identical; each rank holds about half of the moments.
void expect_zero_equals_unsharded(train::TrainOptions o) {
  o.grad_clip = 0.05;
  o.zero = 0;
  train::Trainer unsharded(o);
  std::vector<double> norms;
  while (unsharded.step() < o.steps) {
    const train::StepResult r = unsharded.train_step();
    EXPECT_GT(r.grad_norm, o.grad_clip) << "step " << r.step << " did not clip";
    norms.push_back(r.grad_norm);
  }
  o.zero = 1;
  train::Trainer zero(o);
  const auto* sharded = dynamic_cast<const comm::ZeroAdamW*>(&zero.optimizer());
  ASSERT_NE(sharded, nullptr);
  const int64_t params = zero.model().num_parameters();
  const int64_t buckets = static_cast<int64_t>(zero.data_parallel()->buckets().size());
  EXPECT_LE(sharded->shard_numel(), params / 2 + buckets);  // 1/2, padding at most 1 a bucket
  EXPECT_GE(sharded->shard_numel(), params / 2);
  EXPECT_TRUE(unsharded.optimizer().state_tensors().size() > 0);
  for (size_t k = 0; zero.step() < o.steps; ++k) {
    const train::StepResult r = zero.train_step();
    EXPECT_NEAR(r.grad_norm, norms[k], 1e-12 * norms[k]) << "step " << r.step;
  }
  EXPECT_EQ(weights(zero), weights(unsharded)) << o.device << " " << o.dtype;
  EXPECT_EQ(testing::ranks_differing_from_root(zero.communicator(), weights(zero)), 0);
  if (o.dtype != "bf16") return;
  // bf16: the masters live in the shards, and the all-gathered bf16 copies (what forward reads)
  // are the unsharded run's bit for bit.
  EXPECT_TRUE(sharded->masters_sharded());
  for (const Tensor& p : zero.model().parameters())
    EXPECT_LE(p.storage()->nbytes, 4u) << p.describe() << ": its f32 storage was not freed";
  const std::vector<Tensor> mine = zero.model().compute_copies(),
                            theirs = unsharded.model().compute_copies();
  ASSERT_EQ(mine.size(), theirs.size());
  for (size_t i = 0; i < mine.size(); ++i)  // bf16 -> f32 is exact: equal floats, equal bits
    EXPECT_EQ(to_vector<float>(cast(mine[i], DType::f32)),
              to_vector<float>(cast(theirs[i], DType::f32)))
        << "compute copy " << i;
}

// bf16 on cpu: the bf16 all-gather over MPI (16-bit words).
TEST(ZeroOne, WeightsEqualTheUnshardedRunBitForBitOnCpuInF32AndBf16) {
  for (const char* dtype : {"f32", "bf16"}) {
    train::TrainOptions o = options("cpu");
    o.dtype = dtype;
    expect_zero_equals_unsharded(o);
  }
}

TEST(ZeroOne, WeightsEqualTheUnshardedRunBitForBitOnEmuInF32AndBf16) {
  for (const char* dtype : {"f32", "bf16"}) {
    train::TrainOptions o = options("emu");
    o.dtype = dtype;
    expect_zero_equals_unsharded(o);
  }
}

TEST(ZeroOne, WeightsEqualTheUnshardedRunBitForBitWithGradAccum) {
  train::TrainOptions o = options("cpu");
  o.grad_accum = 2;
  expect_zero_equals_unsharded(o);
}

#if defined(GLASS_CUDA_RUNTIME_EMU)
// Two emulated GPUs, NCCL's reduce-scatter and all-gather queued on each rank's stream.
TEST(ZeroOne, WeightsEqualTheUnshardedRunBitForBitOnCudaInF32AndBf16) {
  for (const char* dtype : {"f32", "bf16"}) {
    train::TrainOptions o = options("cuda");
    o.dtype = dtype;
    expect_zero_equals_unsharded(o);
  }
}
#endif

TEST(ZeroOne, RefusesCudaGraphsSayingWhy) {
  train::TrainOptions o = options("cpu");
  o.zero = 1;
  o.cuda_graph = true;
  const std::string e = testing::error_of([&] { train::Trainer t(o); });
  EXPECT_NE(e.find("--cuda-graph with --zero 1 is not supported"), std::string::npos) << e;
  o.cuda_graph = false;
  o.zero = 2;
  EXPECT_NE(testing::error_of([&] { train::Trainer t(o); }).find("--zero 2"), std::string::npos);
}

// A sharded run's --save file and checkpoints are consolidated: rank 0 writes the unsharded run's
// bytes, the checkpoints hold the same weights and moments bit for bit, and a run resumes
// bit-exactly from either, sharded from unsharded and unsharded from sharded (any world size
// reads them: each rank takes its slices; with `one_process`, a one-process run reads the sharded
// one's moments too). Dropout on: the restored RNG state matters too.
void expect_consolidated_checkpoints(train::TrainOptions o, const std::string& name,
                                     bool one_process) {
  comm::Communicator& c = testing::communicator(kCPU);
  const std::string dir =
      std::filesystem::temp_directory_path() / (name + std::to_string(getppid()));
  if (c.rank() == 0) std::filesystem::remove_all(dir);
  c.barrier();
  o.steps = 4;
  o.dropout = 0.1;
  std::vector<float> want;
  for (int zero : {0, 1}) {
    o.zero = zero;
    o.save = dir + "_" + std::to_string(zero) + ".safetensors";
    train::Trainer t(o);
    t.run();
    const std::vector<float> w = weights(t);
    if (zero == 0) want = w;
    EXPECT_EQ(w, want) << "--zero " << zero;
  }
  c.barrier();
  if (c.rank() == 0) {
    EXPECT_EQ(testing::file_bytes(dir + "_1.safetensors"),
              testing::file_bytes(dir + "_0.safetensors"));
  }
  o.save.clear();
  // Checkpoints after step 2, sharded and not: the same weights and moments, bit for bit.
  o.steps = 2;
  for (int zero : {0, 1}) {
    o.zero = zero;
    o.checkpoint_dir = dir + "/zero" + std::to_string(zero);
    train::Trainer(o).run();
  }
  c.barrier();
  const train::LoadedCheckpoint sharded = train::load_checkpoint(dir + "/zero1");
  const train::LoadedCheckpoint unsharded = train::load_checkpoint(dir + "/zero0");
  for (const auto& [a, b] : {std::pair{&sharded.model, &unsharded.model},
                             std::pair{&sharded.optimizer, &unsharded.optimizer}}) {
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].first, (*b)[i].first);
      EXPECT_EQ(to_vector<float>((*a)[i].second), to_vector<float>((*b)[i].second))
          << (*a)[i].first;
    }
  }
  // Each resumes the other's checkpoint and ends where the straight run ended.
  o.checkpoint_dir.clear();
  o.steps = 4;
  for (int zero : {0, 1}) {
    o.zero = zero;
    o.resume = dir + "/zero" + std::to_string(1 - zero);
    train::Trainer resumed(o);
    EXPECT_EQ(resumed.step(), 2);
    while (resumed.step() < o.steps) resumed.train_step();
    EXPECT_EQ(weights(resumed), want) << "--zero " << zero << " from --zero " << 1 - zero;
  }
  if (one_process) {  // the optimizer holds the sharded checkpoint's moments
    o.zero = 1;
    o.resume = dir + "/zero1";
    o.comm_backend = "local";
    train::Trainer alone(o);
    EXPECT_EQ(alone.step(), 2);
    const NamedTensors state = alone.optimizer().state_tensors();
    ASSERT_EQ(state.size(), sharded.optimizer.size());
    for (size_t i = 0; i < state.size(); ++i)
      EXPECT_EQ(to_vector<float>(state[i].second), to_vector<float>(sharded.optimizer[i].second));
  }
  c.barrier();
  if (c.rank() == 0) {
    std::filesystem::remove_all(dir);
    for (const char* z : {"_0", "_1"}) std::filesystem::remove(dir + z + ".safetensors");
  }
}

TEST(ZeroOne, CheckpointsAreConsolidatedAndResumeBitExactly) {
  expect_consolidated_checkpoints(options("cpu"), "glass_zero_ckpt_", /*one_process=*/true);
}

// bf16 on two emulated GPUs, where each rank keeps only its shard of the f32 masters.
TEST(ZeroOne, Bf16CheckpointsAreConsolidatedAndResumeBitExactlyBothWays) {
  train::TrainOptions o = options("emu");
  o.dtype = "bf16";
  expect_consolidated_checkpoints(o, "glass_zero_bf16_", /*one_process=*/false);
}

// The ledger (train/gpt_cost.h) for data parallelism on 2 ranks, the default model (train_gpt's
// defaults at batch 4), each rank's allocator measured against `roofline gpt --world 2 --zero Z`,
// f32 on cpu and bf16 on emu (where ZeRO-1 also shards the f32 masters):
// - what ZeRO-1 saves (the optimizer's terms: unsharded 8 N of moments and under bf16 4 N of
//   masters, one tensor per parameter each; sharded 8 resp. 12 ceil(N / 2), as two or three flat
//   buffers; each tensor rounded to its size class as the allocator rounds it) is what the
//   allocator's peak drops by, within 3% of it;
// - the whole prediction is within 3% of the measured peak. That needs the unsharded budget to be
//   within 3% too (the same terms, issue 32 item 5): where it is not, the test says by how much
//   and skips this check rather than blame the sharding.
struct MeasuredRun {
  double peak = 0;
  train::GptMemoryBudget budget;
  double optimizer_held = 0;  // moments (and bf16's masters) as the allocator holds them (rounded)
  double planned = 0;         // the pre-flight's planned peak for this rank (train/preflight.h)
};

struct LedgerCase {
  const char* device;
  DType dtype;
  int64_t seq_len;
};
constexpr LedgerCase kF32OnCpu{"cpu", DType::f32, 128};
// Shorter sequences: the emulator runs the CUDA kernels on the host (the weight terms, which the
// sharding changes, do not depend on the sequence).
constexpr LedgerCase kBf16OnEmu{"emu", DType::bf16, 32};

MeasuredRun run_default_model(int zero, const LedgerCase& at) {
  train::TrainOptions o;  // train_gpt's defaults: the default model
  o.data = testing::kTinyShakespeare;
  o.device = at.device;
  o.dtype = at.dtype == DType::f32 ? "f32" : "bf16";
  o.seq_len = at.seq_len;
  o.batch = 4;  // 2 rows a rank, so that the test stays fast (the weight terms do not depend on it)
  o.steps = 1;  // the first step allocates every term (the gradients at its backward)
  o.sample = 0;
  o.eval_every = 0;
  o.quiet = true;
  o.threads = 1;
  o.dropout = 0;
  o.comm_timeout_s = 120;
  o.zero = zero;
  const Device device = Device::parse(at.device);
  const bool gpu_kernels = runs_cuda_kernels(device);
  // emu: cuBLAS's GEMM workspace is made first (a process makes it once and keeps it), so that
  // neither run counts it; the pre-flight's plan, which adds it, is compared without it.
  if (gpu_kernels)
    matmul(Tensor::empty({8, 8}, DType::f32, device), Tensor::empty({8, 8}, DType::f32, device));
  Allocator& allocator = Allocator::for_device(device);
  allocator.empty_cache();
  const int64_t before = allocator.stats().allocated_bytes;
  allocator.reset_peaks();
  train::Trainer t(o);
  while (t.step() < o.steps) t.train_step();
  MeasuredRun m;
  m.peak = static_cast<double>(allocator.stats().peak_allocated_bytes - before);
  train::PreflightRun run;  // this rank's step, as train_gpt plans it
  run.device = device;
  run.world = t.communicator().size();
  run.zero = zero;
  run.plan.config = t.model().config;
  run.plan.batch = o.batch / run.world;
  run.plan.seq_len = o.seq_len;
  run.plan.dtype = at.dtype;
  m.planned = static_cast<double>(train::plan_preflight(run).planned_peak_bytes) -
              (gpu_kernels ? static_cast<double>(kernels::cuda::kGemmWorkspaceBytes) : 0);
  m.budget = train::gpt_memory_budget(t.model().config, o.batch, o.seq_len, at.dtype,
                                      {.fused_classifier = gpu_kernels,  // as train_gpt runs it
                                       .gemm_workspace = false,
                                       .world = t.communicator().size(),
                                       .zero = zero});
  auto held = [&allocator](int64_t elements) {  // as the allocator rounds it (class_of)
    return static_cast<double>(allocator.class_of(static_cast<size_t>(4 * elements)));
  };
  const double buffers = at.dtype == DType::f32 ? 2 : 3;  // m, v (and the f32 masters)
  if (zero == 0)
    for (const Tensor& p : t.model().parameters()) m.optimizer_held += buffers * held(p.numel());
  if (zero == 1) {
    const auto* sharded = dynamic_cast<const comm::ZeroAdamW*>(&t.optimizer());
    EXPECT_NE(sharded, nullptr);
    if (sharded != nullptr) {
      EXPECT_EQ(sharded->masters_sharded(), at.dtype != DType::f32);
      m.optimizer_held = buffers * held(sharded->shard_numel());
      // The budget's terms are what the optimizer holds (padding aside).
      const double slack = static_cast<double>(t.data_parallel()->buckets().size());
      EXPECT_NEAR(8.0 * static_cast<double>(sharded->shard_numel()), m.budget.adam_bytes,
                  8.0 * slack);
      if (at.dtype != DType::f32) {
        EXPECT_NEAR(4.0 * static_cast<double>(sharded->shard_numel()), m.budget.master_bytes,
                    4.0 * slack);
      }
    }
  }
  return m;
}

// Each rank's run of the default model, made once per process and read by both the budget's test
// and the pre-flight's: the four runs on emu take most of this program's time under the
// sanitizers. Both ranks run the same tests in the same order, so they run (or reuse) the same
// collective steps.
const MeasuredRun& measure_default_model(int zero, const LedgerCase& at = kF32OnCpu) {
  static std::map<std::pair<int, const LedgerCase*>, MeasuredRun> runs;
  const auto key = std::make_pair(zero, &at);
  auto found = runs.find(key);
  if (found == runs.end()) found = runs.emplace(key, run_default_model(zero, at)).first;
  return found->second;
}

void expect_budget_predicts_each_ranks_peak(const LedgerCase& at) {
  const MeasuredRun &unsharded = measure_default_model(0, at),
                    &sharded = measure_default_model(1, at);
  const double saved = unsharded.peak - sharded.peak;
  // The budget's terms, before rounding, then as the allocator rounds them.
  const double N = static_cast<double>(unsharded.budget.parameters);
  EXPECT_EQ(unsharded.budget.adam_bytes - sharded.budget.adam_bytes,
            8.0 * N - 8.0 * std::ceil(N / 2));
  EXPECT_EQ(unsharded.budget.master_bytes - sharded.budget.master_bytes,
            at.dtype == DType::f32 ? 0.0 : 4.0 * N - 4.0 * std::ceil(N / 2));
  const double predicted_saving = unsharded.optimizer_held - sharded.optimizer_held;
  EXPECT_NEAR(predicted_saving, saved, 0.03 * saved)
      << at.device << ": predicted saving " << predicted_saving << " B, measured " << saved
      << " B (peaks " << unsharded.peak << " B unsharded, " << sharded.peak << " B sharded)";
  const double off = std::abs(unsharded.budget.total_bytes() / unsharded.peak - 1);
  if (off > 0.03)
    GTEST_SKIP() << at.device << ": the unsharded budget is " << 100 * off
                 << "% off the measured peak (" << unsharded.budget.total_bytes() << " B vs "
                 << unsharded.peak << " B): the per-rank total is checked once it is within 3%";
  EXPECT_NEAR(sharded.budget.total_bytes(), sharded.peak, 0.03 * sharded.peak)
      << at.device << ": predicted " << sharded.budget.total_bytes() << " B, measured "
      << sharded.peak << " B";
}

TEST(ZeroOne, TheBudgetPredictsEachRanksPeakWithin3Percent) {
  expect_budget_predicts_each_ranks_peak(kF32OnCpu);
}

TEST(ZeroOne, TheBudgetPredictsEachRanksPeakWithin3PercentInBf16OnEmu) {
  expect_budget_predicts_each_ranks_peak(kBf16OnEmu);
}

// The pre-flight's plan of a rank's step (one process on meta, plus the cost model's buckets and
// ZeRO-1's share of the moments and bf16's masters: train/preflight.h) against the allocator's
// peak of that rank, within 3%, with and without ZeRO-1.
TEST(ZeroOne, ThePreflightPlansEachRanksPeakWithin3Percent) {
  for (int zero : {0, 1}) {
    const MeasuredRun& r = measure_default_model(zero);
    EXPECT_NEAR(r.planned, r.peak, 0.03 * r.peak)
        << "--zero " << zero << ": planned " << r.planned << " B, measured " << r.peak << " B";
  }
}

TEST(ZeroOne, ThePreflightPlansEachRanksPeakWithin3PercentInBf16OnEmu) {
  for (int zero : {0, 1}) {
    const MeasuredRun& r = measure_default_model(zero, kBf16OnEmu);
    EXPECT_NEAR(r.planned, r.peak, 0.03 * r.peak)
        << "--zero " << zero << ": planned " << r.planned << " B, measured " << r.peak << " B";
  }
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
