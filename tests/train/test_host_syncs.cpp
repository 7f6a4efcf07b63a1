// No host synchronisation inside a training step (engine/launch.h: note_host_sync): on emu, which
// counts the waits its engine code performs as a GPU would pay for them, a step reads its status
// once, at the end (optim/step_status.h: the loss, the global gradient norm and the finite gate of
// --on-nonfinite, in one copy), with or without clipping and gradient accumulation; no op reads
// anything back (an op that did, e.g. to check ids or targets, or clipping reading the norm,
// fails the test with its name). The per-step metrics say the same.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/launch.h"
#include "train_testing.h"

namespace glass::train {
namespace {

struct SyncRecorder : LaunchObserver {
  std::vector<HostSync> syncs;
  void on_host_sync(const HostSync& s) override { syncs.push_back(s); }
};

std::string describe(const std::vector<HostSync>& syncs) {
  std::string s;
  for (const HostSync& h : syncs)
    s += fmt::format("[{} on {} in op '{}' ({})] ", h.what, h.device.str(), h.op,
                     phase_name(h.phase));
  return s;
}

TEST(HostSyncs, OneStatusReadPerStepAndNoneInsideOps) {
  TrainOptions o = testing::tiny_options();
  o.device = "emu";
  o.grad_clip = 0;  // no clipping: the norm is still computed, for the finite gate
  o.steps = 3;
  Trainer trainer(o);
  for (int i = 0; i < 3; ++i) {
    SyncRecorder rec;
    subscribe(&rec);
    const StepResult r = trainer.train_step();
    unsubscribe(&rec);
    EXPECT_EQ(r.host_syncs, 1) << describe(rec.syncs);
    ASSERT_EQ(rec.syncs.size(), 1u) << describe(rec.syncs);
    EXPECT_STREQ(rec.syncs[0].what, "copy_to_host");
    EXPECT_STREQ(rec.syncs[0].op, "") << "an op waited for the device: " << describe(rec.syncs);
  }
}

TEST(HostSyncs, OneAlsoWhenClippingAndAccumulating) {
  TrainOptions o = testing::tiny_options();
  o.device = "emu";
  o.grad_clip = 1.0;
  o.grad_accum = 2;  // the micro-steps' losses add up on the device: still one read
  Trainer trainer(o);
  SyncRecorder rec;
  subscribe(&rec);
  const StepResult r = trainer.train_step();
  unsubscribe(&rec);
  EXPECT_EQ(r.host_syncs, 1) << describe(rec.syncs);
  ASSERT_EQ(rec.syncs.size(), 1u) << describe(rec.syncs);
  EXPECT_STREQ(rec.syncs[0].op, "") << "an op waited for the device: " << describe(rec.syncs);
}

TEST(HostSyncs, CpuNeverWaitsAndTheMetricsSayHowOftenEmuDid) {
  for (const std::string device : {"cpu", "emu"}) {
    TrainOptions o = testing::tiny_options();
    o.device = device;
    o.steps = 2;
    o.metrics = testing::temp_dir("host_syncs_" + device) + "/metrics.jsonl";
    Trainer trainer(o);
    trainer.run();
    std::ifstream in(o.metrics);
    std::string line;
    int lines = 0;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      EXPECT_EQ(j.at("host_syncs").get<int64_t>(), device == "cpu" ? 0 : 1) << line;
      ++lines;
    }
    EXPECT_EQ(lines, 2) << device;
  }
}

}  // namespace
}  // namespace glass::train
