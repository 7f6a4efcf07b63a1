// No host synchronisation inside a training step (engine/launch.h: note_host_sync): on emu, which
// counts the waits its engine code performs as a GPU would pay for them, a step reads its status
// once, at the end (optim/step_status.h: the loss, the global gradient norm and the finite gate of
// --on-nonfinite, in one copy), with or without clipping and gradient accumulation; no op reads
// anything back (an op that did, e.g. to check ids or targets, or clipping reading the norm,
// fails the test with its name). The per-step metrics say the same.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#if defined(GLASS_CUDA_RUNTIME_EMU)
#include "emucuda/runtime/runtime.h"
#endif

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

#if defined(GLASS_CUDA_RUNTIME_EMU)
// cuda on the emulated CUDA runtime, --grad-accum 3, with the GPU behind the host, as a fast host
// keeps it: a gate queued on the step's stream holds every copy and kernel of the step until the
// host first waits for the device. Uploads do not wait for their copies, but a staging buffer is
// refilled only once its last copy has run: a step whose uploads outnumber the staging ring's
// buffers (each micro-step's x and y, 6, and AdamW's scalars: 7 for 4 buffers) made the host wait
// mid-step, a second host sync (host_syncs 2; without the gate it came and went with timing). Now
// the micro-steps' batches are uploaded stacked, two uploads whatever k is, and the status read at
// the end is the step's one wait.
TEST(HostSyncs, OneOnCudaWithGradAccumWhenTheGpuLagsBehind) {
  TrainOptions o = testing::tiny_options();
  o.device = "cuda";
  o.dtype = "f32";
  o.grad_accum = 3;
  o.steps = 2;
  Trainer trainer(o);
  trainer.train_step();  // first-touch allocations and caches
  // The gate opens once the host has counted its first wait of the step (note_host_sync counts a
  // wait before the host blocks), or after 60 s should an uncounted wait block the host. Polled
  // from another thread: a launch observer would time every kernel on the GPU, a wait per launch.
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
  ASSERT_EQ(
      emu::runtime::enqueue(nullptr, "a GPU behind the host", {}, [opened] { opened.wait(); }),
      cudaSuccess);
  const uint64_t before = host_sync_count();
  std::thread opener([&] {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (host_sync_count() == before && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    open.set_value();
  });
  const StepResult r = trainer.train_step();
  opener.join();
  EXPECT_EQ(r.host_syncs, 1);
}
#endif

}  // namespace
}  // namespace glass::train
