// --cuda-graph (train/graph_step.h, engine/cuda/graph.h): the training step captured once and
// replayed. Runs where the cuda device exists: a GPU, or the emulated CUDA runtime of a build with
// -DGLASS_CUDA_RUNTIME=emu (`make test CUDA_RUNTIME=emu`), which emulates stream capture and graph
// launch (emucuda/runtime/capture.h). The reference for the replayed run is the eager run of
// the same program: the graph path shares the step's code by design, and what the test catches is
// what capture changes (a learning rate, bias correction, batch or flag baked into the graph at
// capture, a buffer the replay reads at the wrong address, a launch the trace loses). The eager
// step itself is checked against PyTorch by the oracle tests. With data parallelism (2 ranks, so
// under mpirun): tests/comm_mpi/test_data_parallel.cpp (DataParallel.CudaGraph*), on these
// helpers (cuda_graph_testing.h). And the step explorer of a replayed step: the captured tape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "cuda_graph_testing.h"
#include "engine/allocator.h"
#include "engine/launch.h"
#include "kernels/backend.h"
#include "report_testing.h"
#include "tests/testing.h"
#include "train/graph_step.h"
#include "train_testing.h"

#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/graph.h"
#include "engine/cuda/runtime.h"
#endif

namespace glass::train {
namespace {

#if defined(GLASS_HAS_CUDA)

using testing::expect_same_run;
using testing::expect_same_weights;
using testing::graph_options;
using testing::have_cuda;
using testing::join;
using testing::same_bits;
using testing::train;
using testing::TrainedRun;
using testing::weights_of;

TEST(CudaGraph, ReplayedStepsEqualTheEagerRunBitForBit) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  for (const double clip : {0.0, 0.05}) {  // 0.05: every step clips (norms are ~1 here)
    SCOPED_TRACE(clip);
    const TrainedRun eager = train(false, clip);
    const TrainedRun replayed = train(true, clip);
    expect_same_run(eager, replayed);
    // The losses move (the test would not see a stale batch or learning rate otherwise).
    EXPECT_NE(replayed.losses[1], replayed.losses[4]);
    // One host read per step, the step's status (loss, norm, finite gate), with or without
    // clipping, with the graph as without it. From step 2 on: a run's first step may wait once
    // more (the staging ring's buffers last used by an earlier run on another stream).
    for (size_t s = 1; s < replayed.host_syncs.size(); ++s) {
      EXPECT_EQ(replayed.host_syncs[s], 1) << "step " << s + 1;
      EXPECT_EQ(eager.host_syncs[s], 1) << "step " << s + 1;
    }
  }
}

// The step explorer of a replayed step (--profile-steps 3:3; step 2 was captured): a replay runs
// no forward on the host, so the report's tape is the captured step's, whose kernels and node ids
// the replay launches (every launch's node is on it), each node with its gradient norm from the
// eager pass before step 3, between replays; the run trains the same bits as without --report.
TEST(CudaGraph, AReplayedRecordedStepShowsTheCapturedTapeWithGradientNorms) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  const TrainedRun plain = train(true, 0.05);
  TrainOptions o = graph_options(true, 0.05);
  o.report = testing::temp_dir("graph_report") + "/report.html";
  o.profile_steps = "3:3";
  Trainer shown(o);
  shown.run();
  ASSERT_NE(shown.graph(), nullptr);
  EXPECT_GE(shown.graph()->replays(), 3);
  TrainedRun measured;
  measured.weights = weights_of(shown);
  expect_same_weights(plain, measured);
  const nlohmann::json d = testing::report_json(testing::file_bytes(o.report));
  ASSERT_EQ(d["step"], 3);
  ASSERT_FALSE(d["tape"].empty());
  std::set<int64_t> tape_ids;
  for (const auto& n : d["tape"]) {
    tape_ids.insert(n["id"].get<int64_t>());
    ASSERT_TRUE(n["grad_norm"].is_number()) << n;
    EXPECT_GT(n["grad_norm"].get<double>(), 0) << n;
  }
  EXPECT_NEAR(d["tape"].back()["grad_norm"].get<double>(), 1.0, 1e-12);  // d loss / d loss
  ASSERT_FALSE(d["launches"].empty());
  for (const auto& l : d["launches"]) {
    if (l["node"].get<int64_t>() >= 0) {
      EXPECT_TRUE(tape_ids.count(l["node"].get<int64_t>())) << l;
    }
  }
}

// Step 3 of `replayed` (a graph replay) launched the kernels of step 3 of `eager`, in the same
// order, each marked with its graph, and no kernel from the host: what a replay stages before the
// graph (the step's x and y, all micro-steps' rows stacked, into the graph's inputs; the AdamW
// scalars; with dropout the generator's offset) are uploads into the memory the graph reads, not
// kernels. Returns the kernel names of the replay.
std::vector<std::string> expect_replay_of_the_eager_step(const TrainedRun& eager,
                                                         const TrainedRun& replayed) {
  std::vector<std::string> eager_kernels, graph_kernels, host_kernels;
  for (const LaunchInfo& i : eager.step3) eager_kernels.emplace_back(i.kernel);
  for (const LaunchInfo& i : replayed.step3) {
    EXPECT_EQ(i.device.kind, DeviceKind::cuda);
    (i.graph != 0 ? graph_kernels : host_kernels).emplace_back(i.kernel);
  }
  EXPECT_GT(graph_kernels.size(), 20u);
  EXPECT_EQ(graph_kernels, eager_kernels);
  EXPECT_EQ(host_kernels, std::vector<std::string>{});
  return graph_kernels;
}

// Every kernel of a replayed step reaches the observers (a trace), marked with its graph.
TEST(CudaGraph, TheTraceShowsEachReplayedKernel) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  const TrainedRun eager = train(false, 1.0);
  const TrainedRun replayed = train(true, 1.0);
  expect_replay_of_the_eager_step(eager, replayed);
}

// --grad-accum 3: the graph holds the whole optimizer step, three micro-steps' forward and
// backward on three batches copied (stacked) into the graph's inputs before each replay, then
// clipping and AdamW once. Bit for bit the eager run, whose micro-steps read three different
// windows of the data: a replay that fed one micro-step's tokens to another, or baked the captured
// step's batches in, would change the losses. The trace shows that step 3 was a replay of all three
// micro-steps.
TEST(CudaGraph, GradAccumCapturesTheWholeOptimizerStep) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  const auto accumulate_3 = [](TrainOptions& o) {
    o.grad_accum = 3;
    o.steps = 4;
  };
  const TrainedRun eager = train(false, 0.05, accumulate_3);
  const TrainedRun replayed = train(true, 0.05, accumulate_3);
  expect_same_run(eager, replayed);
  EXPECT_NE(replayed.losses[1], replayed.losses[3]);
  EXPECT_EQ(replayed.adamw_steps, 4);
  // One host read per step: the k batches are one upload for x and one for y, so the staging
  // ring never waits (it did with an upload per micro-step: 4 host syncs per step).
  for (size_t s = 1; s < replayed.host_syncs.size(); ++s)
    EXPECT_EQ(replayed.host_syncs[s], 1) << "step " << s + 1;
  const std::vector<std::string> replay = expect_replay_of_the_eager_step(eager, replayed);
  // Three forwards in the replay (the same embedding lookups each), AdamW once.
  EXPECT_GE(testing::count_of(replay, "embedding_forward"), 3);
  EXPECT_EQ(testing::count_of(replay, "embedding_forward") % 3, 0);
  EXPECT_GE(testing::count_of(replay, "adamw_step"), 1);
}

// What a capture cannot hold fails at once with the call and the op that made it; the failed
// capture leaves nothing behind (the stream runs eagerly again).
TEST(CudaGraph, CaptureRefusesHostSyncsAndUploads) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  cuda::Graph graph;
  const cuda::StreamGuard on(graph.stream());
  const Tensor x = from_vector<float>({1, 2, 3}, {3}, kCUDA);
  // Run eagerly first: the allocator's cache then holds every block the captured body takes.
  EXPECT_EQ(item(sum(x * 2.0)), 12.0);

  const std::string sync = testing::error_of([&] {
    graph.capture([&] {
      const LaunchScope scope("cross_entropy", 12, Phase::forward);
      const Tensor z = x * 2.0;
      (void)item(sum(z));
    });
  });
  EXPECT_TRUE(testing::contains_all(sync, {"copy_to_host on cuda:0 inside a CUDA graph capture",
                                           "op 'cross_entropy'", "node 12", "cannot wait"}))
      << sync;
  EXPECT_FALSE(graph.captured());

  const std::string upload = testing::error_of([&] {
    graph.capture([&] { (void)from_vector<float>({4, 5}, {2}, kCUDA); });
  });
  EXPECT_TRUE(testing::contains_all(upload, {"an upload from host memory",
                                             "inside a CUDA graph "
                                             "capture"}))
      << upload;

  // After the refusals the stream is an ordinary one again, and a clean capture replays.
  EXPECT_EQ(to_vector<float>(x * 3.0), (std::vector<float>{3, 6, 9}));
  const Tensor out = Tensor::empty({3}, DType::f32, kCUDA);
  graph.capture([&] { kernels::backend(out).affine(x, out, 10.0, 1.0); });
  ASSERT_TRUE(graph.captured());
  EXPECT_EQ(graph.launches().size(), 1u);
  graph.replay();
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{11, 21, 31}));
}

void* block_of(const Tensor& t) { return static_cast<void*>(t.data<float>()); }

// The graph's private memory pool (engine/allocator.h): a capture with nothing cached takes fresh
// memory (cudaMalloc in relaxed capture mode; the emulated runtime refuses it in the global mode
// the capture runs in, so this fails if the allocator does not switch), blocks freed during the
// capture become the pool's (also one made before it), and no eager allocation after the capture
// gets a pool block, though the pool holds free blocks of the very size asked for.
TEST(CudaGraph, ACaptureWithAColdCacheAllocatesFromTheGraphsOwnPool) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  Allocator& allocator = Allocator::for_device(kCUDA);
  std::set<void*> pool;
  {
    cuda::Graph graph;
    const cuda::StreamGuard on(graph.stream());
    const Tensor x = from_vector<float>({1, 2, 3}, {3}, kCUDA);
    Tensor made_before = Tensor::empty({3}, DType::f32, kCUDA);
    void* const before_block = block_of(made_before);
    allocator.empty_cache();  // cold: nothing cached that the capture could take
    const AllocatorStats cold = allocator.stats();
    Tensor out;
    void* temp_block = nullptr;
    graph.capture([&] {
      const Tensor doubled = x * 2.0;  // a temporary: freed inside the capture
      temp_block = block_of(doubled);
      out = doubled + 1.0;
      made_before = Tensor();  // freed inside the capture: the pool's from now on
    });
    ASSERT_TRUE(graph.captured());
    const AllocatorStats captured = allocator.stats();
    EXPECT_GT(captured.device_malloc_count, cold.device_malloc_count);
    EXPECT_GT(captured.pool_reserved_bytes, cold.pool_reserved_bytes);
    for (void* p : allocator.pool_blocks(graph.memory_pool())) pool.insert(p);
    EXPECT_TRUE(pool.count(temp_block) && pool.count(block_of(out)) && pool.count(before_block));
    // The two blocks freed inside the capture are free in the pool but in use by every replay:
    // the allocator counts them in use, beside the allocated ones (`out` among those).
    const auto block = static_cast<int64_t>(Allocator::size_class(3 * sizeof(float)));
    EXPECT_EQ(captured.in_use_bytes - captured.allocated_bytes, 2 * block);
    EXPECT_EQ(captured.in_use_bytes - cold.in_use_bytes, 2 * block);  // `out` and the temporary

    // Eager work after the capture: blocks of the size the pool holds free, none of them the
    // pool's; the replays still compute into the graph's own memory.
    std::vector<Tensor> eager;
    for (int i = 0; i < 6; ++i) {
      eager.push_back(x * 5.0);
      EXPECT_EQ(pool.count(block_of(eager.back())), 0u) << "eager tensor " << i;
      graph.replay();
    }
    EXPECT_EQ(to_vector<float>(out), (std::vector<float>{3, 5, 7}));
    EXPECT_EQ(to_vector<float>(eager.back()), (std::vector<float>{5, 10, 15}));
  }
  // The pool lived as long as its graph: its blocks are the shared cache's again, free.
  EXPECT_EQ(allocator.stats().pool_reserved_bytes, 0);
  EXPECT_EQ(allocator.stats().in_use_bytes, allocator.stats().allocated_bytes);
}

// Inside a capture, a block that went back to the graph's pool on one stream of the capture (a
// forked side stream, as the data-parallel all-reduces use) is not handed to a request on another:
// telling whether the side stream's work on it is done needs an event query, which a capture
// refuses (and invalidates the capture for), and nothing in the graph orders the two uses anyway.
TEST(CudaGraph, APoolBlockFreedOnAForkedStreamIsNotReusedOnTheOrigin) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  cuda::Graph graph;
  const cuda::StreamGuard on(graph.stream());
  const cuda::Stream side(0);
  cuda::Event fork, join;
  const Tensor x = from_vector<float>({1, 2, 3}, {3}, kCUDA);
  void* side_block = nullptr;
  Tensor out;
  graph.capture([&] {
    fork.record(graph.stream().handle());
    side.wait(fork.handle());
    {
      const cuda::StreamGuard on_side(side);
      const Tensor temp = x * 2.0;  // allocated and freed on the side stream
      side_block = block_of(temp);
      join.record(side.handle());
    }
    graph.stream().wait(join.handle());
    out = x * 3.0;  // the same size class, on the origin
  });
  ASSERT_TRUE(graph.captured());
  EXPECT_NE(block_of(out), side_block);
  graph.replay();
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{3, 6, 9}));
}

// A capture after an eager warm-up takes over the warm-up's cached blocks (freed on the graph's
// stream) instead of fresh memory: the step's working memory is reserved once, not once in the
// shared cache and again in the pool. The adopted blocks are the pool's: eager work after the
// capture gets none of them.
TEST(CudaGraph, ACaptureAfterAWarmUpTakesOverItsCachedBlocks) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  Allocator& allocator = Allocator::for_device(kCUDA);
  cuda::Graph graph;
  const cuda::StreamGuard on(graph.stream());
  const Tensor x = from_vector<float>({1, 2, 3}, {3}, kCUDA);
  const auto step = [&] { return (x * 2.0) + 1.0; };
  allocator.empty_cache();
  step();  // the warm-up: its two blocks are freed into the shared cache, on the graph's stream
  const AllocatorStats warm = allocator.stats();
  Tensor out;
  graph.capture([&] { out = step(); });
  ASSERT_TRUE(graph.captured());
  const AllocatorStats captured = allocator.stats();
  EXPECT_EQ(captured.device_malloc_count, warm.device_malloc_count) << "fresh memory was taken";
  EXPECT_EQ(captured.reserved_bytes, warm.reserved_bytes);
  EXPECT_GT(captured.pool_reserved_bytes, warm.pool_reserved_bytes);
  const std::vector<void*> blocks = allocator.pool_blocks(graph.memory_pool());
  const std::set<void*> pool(blocks.begin(), blocks.end());
  EXPECT_EQ(pool.count(block_of(out)), 1u);
  const Tensor eager = x * 5.0;
  EXPECT_EQ(pool.count(block_of(eager)), 0u);
  graph.replay();
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{3, 5, 7}));
}

// The same at the scale of a training run: a --cuda-graph run reserves at most what the eager run
// does plus a small part of the graph's pool (before the pool took over the warm-up's blocks, the
// excess was the pool: the step's working memory reserved twice).
TEST(CudaGraph, ReservesTheStepsWorkingMemoryOnce) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  Allocator& allocator = Allocator::for_device(kCUDA);
  const auto peak_reserved = [&](bool graph, int64_t* pool) {
    allocator.empty_cache();
    allocator.reset_peaks();
    TrainOptions o = graph_options(graph, 0.0);
    o.steps = 3;
    Trainer trainer(o);
    for (int s = 0; s < o.steps; ++s) trainer.train_step();
    if (pool) *pool = allocator.stats().pool_reserved_bytes;
    return allocator.stats().peak_reserved_bytes;
  };
  // One graph run first: the GEMM workspaces of the default stream and of the graph's stream
  // (gemm.cu: one per stream, kept for the process) then exist in both measured runs.
  peak_reserved(true, nullptr);
  int64_t pool = 0;
  const int64_t eager = peak_reserved(false, nullptr), replayed = peak_reserved(true, &pool);
  ASSERT_GT(pool, 0);
  EXPECT_LE(replayed - eager, pool / 4)
      << "eager " << eager << " B, --cuda-graph " << replayed << " B, its pool " << pool << " B";
}

// --on-nonfinite with the graph: a NaN put into a gradient at a replayed step is turned away by
// the finite gate on the device, as in the eager run. `skip`: the runs stay bit-identical (so the
// replayed gate kept the weights and moments, and the bias-correction count, as the eager one
// did; test_nonfinite checks the eager gate against the step before), and the skipped step does
// not count as an AdamW step. `stop`: the weights are those of the step before, the message names
// the step, and the eager re-run in anomaly mode finds no op that made the NaN.
TEST(CudaGraph, NonFiniteStepIsSkippedOrStopsAsWithoutTheGraph) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  const auto skip = [](TrainOptions& o) { o.on_nonfinite = "skip"; };
  // The second replay (step 1 is eager, step 2 captured).
  const auto nan_at_3 = [](Trainer& t) { testing::inject_nan_at_step(t, 3); };
  const TrainedRun eager = train(false, 1.0, skip, nan_at_3);
  const TrainedRun replayed = train(true, 1.0, skip, nan_at_3);
  const std::vector<bool> expected{false, false, true, false, false};
  EXPECT_EQ(eager.skipped, expected);
  EXPECT_EQ(replayed.skipped, expected);
  EXPECT_TRUE(same_bits(eager.losses, replayed.losses))
      << join(eager.losses) << " vs " << join(replayed.losses);
  EXPECT_TRUE(std::isnan(replayed.norms[2]));
  EXPECT_EQ(replayed.adamw_steps, 4);
  EXPECT_EQ(eager.adamw_steps, 4);
  expect_same_weights(eager, replayed);
  for (const auto& w : replayed.weights)
    for (float v : w) ASSERT_TRUE(std::isfinite(v));

  Trainer t(graph_options(true, 1.0));  // --on-nonfinite stop, the default
  testing::inject_nan_at_step(t, 3);
  t.train_step();
  t.train_step();
  const std::vector<std::vector<float>> after_step2 = weights_of(t);
  const std::string e = testing::error_of([&] { t.train_step(); });
  EXPECT_TRUE(testing::contains_all(e, {"step 3: non-finite gradients", "weights were not updated",
                                        "found no op that produced it"}))
      << e;
  EXPECT_EQ(weights_of(t), after_step2);
}

// --dropout with the graph: the captured dropout kernels read their Philox offset from device
// memory written before each replay, so replay n draws the masks the eager step n draws. Bit for
// bit the eager run (losses, norms, weights), which draws a fresh mask every step: a replay that
// repeated the captured step's masks would change the losses from step 3 on. The trace shows the
// dropout kernels came from the graph, and the generator ends where the eager one does (what a
// checkpoint saves).
TEST(CudaGraph, DropoutReplaysEqualTheEagerRunBitForBit) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  // f32 with one micro-step; bf16 (its own dropout kernel and causal mask) with two.
  for (const auto& [accumulate, dtype] : {std::pair<int64_t, std::string>{1, "f32"}, {2, "bf16"}}) {
    SCOPED_TRACE(dtype);
    const auto with_dropout = [&](TrainOptions& o) {
      o.dropout = 0.2;
      o.grad_accum = accumulate;
      o.dtype = dtype;
      o.steps = 4;
    };
    const TrainedRun eager = train(false, 1.0, with_dropout);
    const TrainedRun replayed = train(true, 1.0, with_dropout);
    expect_same_run(eager, replayed);
    EXPECT_EQ(replayed.rng_offset, eager.rng_offset);
    EXPECT_EQ(replayed.replays, 3);  // steps 2-4; step 1 is the eager warm-up
    EXPECT_GT(replayed.rng_blocks, 0u);
    EXPECT_EQ(replayed.rng_offset, 4 * replayed.rng_blocks);  // every step draws the same amount
    for (size_t s = 1; s < replayed.host_syncs.size(); ++s)
      EXPECT_EQ(replayed.host_syncs[s], 1) << "step " << s + 1;
    const std::vector<std::string> replay = expect_replay_of_the_eager_step(eager, replayed);
    EXPECT_GT(testing::count_of(replay, "dropout_forward"), 0);
    EXPECT_GT(testing::count_of(replay, "dropout_backward"), 0);
  }
}

// Two replays of one captured dropout draw different masks: each the mask the eager op draws
// with the generator where that replay's step starts (the eager op reads its offset from its
// launch arguments, the captured one from device memory, engine/rng.h).
TEST(CudaGraph, TwoReplaysDrawDifferentDropoutMasks) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  Generator rng(77);
  rng.set_state(77, 5);
  GraphStep graph(kCUDA, &rng);
  const int64_t n = 1001;
  const Tensor x = full({n}, 1.0, DType::f32, kCUDA);
  const Batch none{zeros({1, 1}, DType::i32), zeros({1, 1}, DType::i32)};  // unused, on the host
  const GraphStep::Body body = [&](const std::vector<Batch>&) {
    return dropout(x, 0.5, true, rng);
  };
  std::vector<std::vector<float>> masks;
  for (int replay = 0; replay < 3; ++replay) {
    const uint64_t offset = rng.offset();
    masks.push_back(to_vector<float>(graph.step({none}, body)));
    Generator eager(77);
    eager.set_state(77, offset);
    EXPECT_EQ(masks.back(), to_vector<float>(dropout(x, 0.5, true, eager))) << "replay " << replay;
    EXPECT_EQ(rng.offset(), eager.offset());
  }
  EXPECT_EQ(graph.replays(), 3);
  EXPECT_EQ(graph.rng_blocks_per_replay(), static_cast<uint64_t>((n + 3) / 4));
  EXPECT_NE(masks[0], masks[1]);
  EXPECT_NE(masks[1], masks[2]);
  const auto kept = std::count(masks[1].begin(), masks[1].end(), 2.0f);
  EXPECT_GT(kept, n / 4);
  EXPECT_LT(kept, 3 * n / 4);
}

#endif

TEST(CudaGraph, NeedsTheCudaDevice) {
  TrainOptions o = testing::tiny_options();
  o.device = "emu";
  o.cuda_graph = true;
  const std::string e = testing::error_of([&] { Trainer t(o); });
  EXPECT_NE(e.find("--cuda-graph"), std::string::npos) << e;
}

}  // namespace
}  // namespace glass::train
