// --cuda-graph (train/graph_step.h, engine/cuda/graph.h): the training step captured once and
// replayed. Runs where the cuda device exists: a GPU, or the emulated CUDA runtime of a build with
// -DGLASS_CUDA_RUNTIME=emu (`make test CUDA_RUNTIME=emu`), which emulates stream capture and graph
// launch (engine/emu/runtime/capture.h). The reference for the replayed run is the eager run of
// the same program: the graph path shares the step's code by design, and what the test catches is
// what capture changes (a learning rate, bias correction, batch or flag baked into the graph at
// capture, a buffer the replay reads at the wrong address, a launch the trace loses). The eager
// step itself is checked against PyTorch by the oracle tests.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"
#include "tests/testing.h"
#include "train_testing.h"

#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/graph.h"
#include "engine/cuda/runtime.h"
#endif

namespace glass::train {
namespace {

#if defined(GLASS_HAS_CUDA)

bool have_cuda() { return cuda::device_count() > 0; }

std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{:.17g} ", x);
  return s;
}

struct TrainedRun {
  std::vector<double> losses, norms;
  std::vector<int64_t> host_syncs;
  std::vector<std::vector<float>> weights;
  std::vector<LaunchInfo> step3;  // the launches of step 3
};

TrainedRun train(bool graph, double clip) {
  TrainOptions o = testing::tiny_options();
  o.device = "cuda";
  o.dtype = "f32";
  o.dropout = 0;
  o.grad_clip = clip;
  o.steps = 5;
  o.cuda_graph = graph;
  Trainer trainer(o);
  TrainedRun run;
  for (int s = 1; s <= o.steps; ++s) {
    std::optional<testing::LaunchLog> log;
    if (s == 3) log.emplace();
    const StepResult r = trainer.train_step();
    if (log)
      for (const LaunchRecord& rec : log->records) run.step3.push_back(rec.info);
    run.losses.push_back(r.loss);
    run.norms.push_back(r.grad_norm);
    run.host_syncs.push_back(r.host_syncs);
  }
  for (const auto& [name, p] : trainer.model().named_parameters())
    run.weights.push_back(to_vector<float>(p));
  return run;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

TEST(CudaGraph, ReplayedStepsEqualTheEagerRunBitForBit) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  for (const double clip : {0.0, 0.05}) {  // 0.05: every step clips (norms are ~1 here)
    SCOPED_TRACE(clip);
    const TrainedRun eager = train(false, clip);
    const TrainedRun replayed = train(true, clip);
    EXPECT_TRUE(same_bits(eager.losses, replayed.losses))
        << join(eager.losses) << " vs " << join(replayed.losses);
    EXPECT_TRUE(same_bits(eager.norms, replayed.norms))
        << join(eager.norms) << " vs " << join(replayed.norms);
    ASSERT_EQ(eager.weights.size(), replayed.weights.size());
    for (size_t i = 0; i < eager.weights.size(); ++i)
      EXPECT_EQ(std::memcmp(eager.weights[i].data(), replayed.weights[i].data(),
                            eager.weights[i].size() * sizeof(float)),
                0)
          << "parameter " << i;
    // The losses move (the test would not see a stale batch or learning rate otherwise).
    EXPECT_NE(replayed.losses[1], replayed.losses[4]);
    // One host read per step for the loss, one more for the norm when clipping: with the graph as
    // without it. From step 2 on: a run's first step may wait once more (the staging ring's
    // buffers last used by an earlier run on another stream; eager and graph runs alike).
    for (size_t s = 1; s < replayed.host_syncs.size(); ++s) {
      EXPECT_EQ(replayed.host_syncs[s], clip > 0 ? 2 : 1) << "step " << s + 1;
      EXPECT_EQ(eager.host_syncs[s], clip > 0 ? 2 : 1) << "step " << s + 1;
    }
  }
}

// Every kernel of a replayed step reaches the observers (a trace), marked with its graph: the
// same kernels in the same order as the eager step, less the AdamW scalars' copy that a replay
// stages before the graph (and plus the batch's two copies into the graph's inputs).
TEST(CudaGraph, TheTraceShowsEachReplayedKernel) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  const TrainedRun eager = train(false, 1.0);
  const TrainedRun replayed = train(true, 1.0);
  std::vector<std::string> eager_kernels, graph_kernels, host_kernels;
  for (const LaunchInfo& i : eager.step3)
    if (!(std::string(i.op) == "adamw" && std::string(i.kernel) == "copy"))
      eager_kernels.emplace_back(i.kernel);
  for (const LaunchInfo& i : replayed.step3) {
    EXPECT_EQ(i.device.kind, DeviceKind::cuda);
    (i.graph != 0 ? graph_kernels : host_kernels).emplace_back(i.kernel);
  }
  EXPECT_GT(graph_kernels.size(), 20u);
  EXPECT_EQ(graph_kernels, eager_kernels);
  // From the host: the batch's x and y into the graph's inputs, and the AdamW scalars.
  EXPECT_EQ(host_kernels, (std::vector<std::string>{"copy", "copy", "copy"}));
}

// What a capture cannot hold fails at once with the call and the op that made it; the failed
// capture leaves nothing behind (the stream runs eagerly again).
TEST(CudaGraph, CaptureRefusesHostSyncsUploadsAndAllocations) {
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

  const std::string alloc = testing::error_of(
      [&] { graph.capture([&] { (void)Tensor::empty({1 << 20}, DType::f32, kCUDA); }); });
  EXPECT_TRUE(testing::contains_all(alloc, {"a new allocation of",
                                            "cudaMalloc cannot be "
                                            "captured"}))
      << alloc;

  // After the refusals the stream is an ordinary one again, and a clean capture replays.
  EXPECT_EQ(to_vector<float>(x * 3.0), (std::vector<float>{3, 6, 9}));
  const Tensor out = Tensor::empty({3}, DType::f32, kCUDA);
  graph.capture([&] { kernels::backend(out).affine(x, out, 10.0, 1.0); });
  ASSERT_TRUE(graph.captured());
  EXPECT_EQ(graph.launches().size(), 1u);
  graph.replay();
  EXPECT_EQ(to_vector<float>(out), (std::vector<float>{11, 21, 31}));
}

TEST(CudaGraph, RefusesWhatAReplayCannotRepeat) {
  if (!have_cuda()) GTEST_SKIP() << "no cuda device (a GPU, or -DGLASS_CUDA_RUNTIME=emu)";
  TrainOptions o = testing::tiny_options();
  o.device = "cuda";
  o.dtype = "f32";
  o.cuda_graph = true;  // tiny_options has dropout 0.1
  const std::string e = testing::error_of([&] { Trainer t(o); });
  EXPECT_TRUE(testing::contains_all(e, {"--cuda-graph", "--dropout 0"})) << e;
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
