#include "train/graph_step.h"

#include "autograd/ops.h"
#include "engine/device_runtime.h"
#include "engine/error.h"
#include "train/micro_batches.h"

#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/graph.h"
#include "engine/cuda/runtime.h"
#include "engine/cuda/stream.h"
#endif

namespace glass::train {

#if defined(GLASS_HAS_CUDA)

struct GraphStep::Impl {
  Device device;
  cuda::Graph graph;
  cuda::StreamGuard current{graph.stream()};
  Batch stacked;                   // i32 [k, rows, T]: every micro-step's tokens, read by the graph
  std::vector<Batch> inputs;       // micro-step m's batch: row m of `stacked` (views)
  Tensor output;                   // what the graph writes for the host
  std::vector<PendingFlag> flags;  // registered by the captured ops
  Generator* rng = nullptr;
  // The base the captured random ops add to their offsets: one uint64 in two i32 (glass has no
  // 64-bit integer dtype), written before each replay.
  Tensor rng_base;
  uint64_t rng_blocks = 0;  // Philox counter blocks one replay draws
  int64_t replays = 0;

  const uint64_t* rng_base_address() const {
    return reinterpret_cast<const uint64_t*>(rng_base.data<int32_t>());
  }
  // The generator's offset into rng_base (on the graph's stream), then the generator past the
  // numbers the replay will draw, as the eager step would have left it.
  void stage_rng_base() {
    const uint64_t offset = rng->offset();
    rng_base.copy_from_host(&offset);  // 8 bytes: the two i32
    rng->set_state(rng->seed(), offset + rng_blocks);
  }
};

namespace {

// Ends the generator's device-offset mode however the capture ends.
struct DeviceOffsets {
  Generator& rng;
  DeviceOffsets(Generator& rng, const uint64_t* base) : rng(rng) { rng.offsets_from_device(base); }
  ~DeviceOffsets() { rng.offsets_from_host(); }
};

}  // namespace

GraphStep::GraphStep(Device device, Generator* rng) {
  GLASS_CHECK(capabilities(device).graphs,
              "--cuda-graph needs --device cuda, not {} (CUDA graphs are the CUDA runtime's; "
              "without a GPU, a build with -DGLASS_CUDA_RUNTIME=emu emulates them)",
              device.str());
  // The graph and its stream belong to the GPU current when they are made: the step's own (under
  // mpirun, this rank's), whatever GPU the thread had current.
  cuda::require_device(device.index);
  impl_ = std::make_unique<Impl>();
  impl_->device = device;
  impl_->rng = rng;
}

GraphStep::~GraphStep() = default;

bool GraphStep::captured() const { return impl_->graph.captured(); }

size_t GraphStep::launches_per_replay() const { return impl_->graph.launches().size(); }
int64_t GraphStep::replays() const { return impl_->replays; }
uint64_t GraphStep::rng_blocks_per_replay() const { return impl_->rng_blocks; }

Tensor GraphStep::step(const std::vector<Batch>& batches, const Body& body) {
  Impl& g = *impl_;
  if (!g.graph.captured()) {
    GLASS_CHECK(pending_flags(g.device).empty(),
                "--cuda-graph: device flags are pending before the capture; read them first");
    MicroBatches uploaded = upload_micro_batches(batches, g.device);
    g.stacked = uploaded.stacked;
    g.inputs = std::move(uploaded.micro);
    if (g.rng != nullptr) {
      // Before the capture: an allocation the graph reads, not one of its pool.
      if (!g.rng_base.defined()) g.rng_base = Tensor::empty({2}, DType::i32, g.device);
      const uint64_t start = g.rng->offset();
      {
        const DeviceOffsets relative(*g.rng, g.rng_base_address());
        g.graph.capture([&] { g.output = body(g.inputs); });
      }
      // The capture only reserved the step's numbers: the replay below draws them.
      g.rng_blocks = g.rng->offset() - start;
      g.rng->set_state(g.rng->seed(), start);
    } else {
      g.graph.capture([&] { g.output = body(g.inputs); });
    }
    g.flags = pending_flags(g.device);  // the capture's, read with this replay's loss
  } else {
    GLASS_CHECK(batches.size() == g.inputs.size(),
                "--cuda-graph: the graph was captured with {} micro-step batches, not {}",
                g.inputs.size(), batches.size());
    // The batches uploaded into the graph's input tensors, ordered before the replay on its
    // stream; no kernel is launched.
    upload_micro_batches_into(batches, g.stacked);
    for (const PendingFlag& f : g.flags) defer_flag_check(f.flag, f.message);
  }
  if (g.rng_blocks > 0) g.stage_rng_base();
  g.graph.replay();
  ++g.replays;
  return g.output;
}

#else

struct GraphStep::Impl {};

GraphStep::GraphStep(Device, Generator*) {
  fail(
      "--cuda-graph: this build of glass has no CUDA runtime (CMake found no CUDA toolkit; "
      "-DGLASS_CUDA_RUNTIME=emu emulates one)");
}
GraphStep::~GraphStep() = default;
bool GraphStep::captured() const { return false; }
size_t GraphStep::launches_per_replay() const { return 0; }
int64_t GraphStep::replays() const { return 0; }
uint64_t GraphStep::rng_blocks_per_replay() const { return 0; }
Tensor GraphStep::step(const std::vector<Batch>&, const Body&) { return {}; }

#endif

}  // namespace glass::train
