// The launch gateway sees a whole training step: every launch, each with its phase, and the
// forward and backward launches of one op carry the same autograd node id.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/launch.h"
#include "train_testing.h"

namespace glass::train {
namespace {

struct Recorder : LaunchObserver {
  std::vector<LaunchRecord> records;
  void on_launch_end(const LaunchRecord& r) override { records.push_back(r); }
};

TEST(LaunchGateway, SeesEveryPhaseOfATrainingStep) {
  TrainOptions o = testing::tiny_options();
  Trainer trainer(o);
  Recorder rec;
  subscribe(&rec);
  trainer.train_step();
  unsubscribe(&rec);

  std::map<Phase, int> per_phase;
  std::set<int64_t> forward_nodes, backward_nodes;
  for (const auto& r : rec.records) {
    per_phase[r.info.phase]++;
    EXPECT_STRNE(r.info.kernel, "?");
    EXPECT_LE(r.start_us, r.end_us);
    if (r.info.phase == Phase::forward) {
      EXPECT_GE(r.info.node_id, 0) << r.info.kernel << " has no node";
      EXPECT_STRNE(r.info.op, "") << r.info.kernel;
      forward_nodes.insert(r.info.node_id);
    }
    if (r.info.phase == Phase::backward) {
      EXPECT_GE(r.info.node_id, 0) << r.info.kernel << " has no node";
      EXPECT_STRNE(r.info.op, "") << r.info.kernel;
      backward_nodes.insert(r.info.node_id);
    }
    if (r.info.phase == Phase::optimizer) {
      EXPECT_STRNE(r.info.op, "") << r.info.kernel;
    }
  }
  EXPECT_GT(per_phase[Phase::forward], 20);
  EXPECT_GT(per_phase[Phase::backward], 20);
  // AdamW is one multi-tensor launch for all 4 + 12 per layer parameters (cpu), and the global
  // gradient norm one sum_squares.
  int adamw = 0, sum_squares = 0;
  for (const auto& r : rec.records) {
    adamw += std::string(r.info.kernel) == "adamw_step";
    sum_squares += std::string(r.info.kernel) == "sum_squares";
  }
  EXPECT_EQ(adamw, 1);
  EXPECT_EQ(sum_squares, 1);
  // Backward runs the nodes forward created: most forward nodes launch again in backward (views
  // launch nothing in forward; their backward may).
  int shared = 0;
  for (int64_t id : forward_nodes) shared += backward_nodes.count(id) ? 1 : 0;
  EXPECT_GT(shared, static_cast<int>(forward_nodes.size()) / 2);
}

TEST(LaunchGateway, UnsubscribedObserverSeesNothing) {
  Trainer trainer(testing::tiny_options());
  Recorder rec;
  subscribe(&rec);
  unsubscribe(&rec);
  trainer.train_step();
  EXPECT_TRUE(rec.records.empty());
}

}  // namespace
}  // namespace glass::train
