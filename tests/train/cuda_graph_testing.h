// Runs of train_gpt's Trainer with and without --cuda-graph (train/graph_step.h), compared bit for
// bit: shared by tests/train/test_cuda_graph.cpp (one process) and tests/comm_mpi (data parallel,
// each rank its own graph). Where the cuda device exists: a GPU, or the emulated CUDA runtime.
#pragma once

#if defined(GLASS_HAS_CUDA)

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/cuda/runtime.h"
#include "engine/launch.h"
#include "tests/testing.h"
#include "train/graph_step.h"
#include "train_testing.h"

namespace glass::testing {

inline std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{:.17g} ", x);
  return s;
}

struct TrainedRun {
  std::vector<double> losses, norms;
  std::vector<int64_t> host_syncs;
  std::vector<bool> skipped;
  int64_t adamw_steps = 0;
  int64_t replays = 0;      // of the graph (--cuda-graph)
  uint64_t rng_blocks = 0;  // Philox counter blocks a replay draws
  uint64_t rng_offset = 0;  // the dropout generator's offset at the end
  std::vector<std::vector<float>> weights;
  std::vector<LaunchInfo> step3;  // the launches of step 3
  // Their ops, copied (an op may name a part of the trainer: "ddp_bucket_2").
  std::vector<std::string> step3_ops;
};

inline train::TrainOptions graph_options(bool graph, double clip) {
  train::TrainOptions o = tiny_options();
  o.device = "cuda";
  o.dtype = "f32";
  o.dropout = 0;
  o.grad_clip = clip;
  o.steps = 5;
  o.cuda_graph = graph;
  return o;
}

// `adjust` sets options; `prepare` sees the trainer before its first step (e.g. installs hooks).
inline TrainedRun train(bool graph, double clip,
                        const std::function<void(train::TrainOptions&)>& adjust = nullptr,
                        const std::function<void(train::Trainer&)>& prepare = nullptr) {
  train::TrainOptions o = graph_options(graph, clip);
  if (adjust) adjust(o);
  train::Trainer trainer(o);
  if (prepare) prepare(trainer);
  TrainedRun run;
  for (int s = 1; s <= o.steps; ++s) {
    std::optional<LaunchLog> log;
    if (s == 3) log.emplace();
    const train::StepResult r = trainer.train_step();
    if (log)
      for (const LaunchRecord& rec : log->records) {
        run.step3.push_back(rec.info);
        run.step3_ops.emplace_back(rec.info.op);
      }
    run.losses.push_back(r.loss);
    run.norms.push_back(r.grad_norm);
    run.host_syncs.push_back(r.host_syncs);
    run.skipped.push_back(r.skipped);
  }
  run.adamw_steps = trainer.optimizer().step_count();
  if (trainer.graph() != nullptr) {
    run.replays = trainer.graph()->replays();
    run.rng_blocks = trainer.graph()->rng_blocks_per_replay();
  }
  run.rng_offset = trainer.dropout_generator().offset();
  run.weights = weights_of(trainer);
  return run;
}

inline bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Every parameter of the two runs, bit for bit.
inline void expect_same_weights(const TrainedRun& eager, const TrainedRun& replayed) {
  ASSERT_EQ(eager.weights.size(), replayed.weights.size());
  for (size_t i = 0; i < eager.weights.size(); ++i)
    EXPECT_EQ(std::memcmp(eager.weights[i].data(), replayed.weights[i].data(),
                          eager.weights[i].size() * sizeof(float)),
              0)
        << "parameter " << i;
}

// The losses, gradient norms and parameters of the two runs, bit for bit.
inline void expect_same_run(const TrainedRun& eager, const TrainedRun& replayed) {
  EXPECT_TRUE(same_bits(eager.losses, replayed.losses))
      << join(eager.losses) << " vs " << join(replayed.losses);
  EXPECT_TRUE(same_bits(eager.norms, replayed.norms))
      << join(eager.norms) << " vs " << join(replayed.norms);
  expect_same_weights(eager, replayed);
}

}  // namespace glass::testing

#endif  // GLASS_HAS_CUDA
