#include "train/graph_step.h"

#include "engine/error.h"
#include "kernels/backend.h"

#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/graph.h"
#include "engine/cuda/stream.h"
#endif

namespace glass::train {

#if defined(GLASS_HAS_CUDA)

struct GraphStep::Impl {
  Device device;
  cuda::Graph graph;
  cuda::StreamGuard current{graph.stream()};
  Batch inputs;                    // the captured step's batch: the graph reads these tensors
  Tensor output;                   // what the graph writes for the host
  std::vector<PendingFlag> flags;  // registered by the captured ops
};

GraphStep::GraphStep(Device device) {
  GLASS_CHECK(device.kind == DeviceKind::cuda,
              "--cuda-graph needs --device cuda, not {} (CUDA graphs are the CUDA runtime's; "
              "without a GPU, a build with -DGLASS_CUDA_RUNTIME=emu emulates them)",
              device.str());
  impl_ = std::make_unique<Impl>();
  impl_->device = device;
}

GraphStep::~GraphStep() = default;

bool GraphStep::captured() const { return impl_->graph.captured(); }

size_t GraphStep::launches_per_replay() const { return impl_->graph.launches().size(); }

Tensor GraphStep::step(const Batch& b, const Body& body) {
  Impl& g = *impl_;
  if (!g.graph.captured()) {
    GLASS_CHECK(pending_flags(g.device).empty(),
                "--cuda-graph: device flags are pending before the capture; read them first");
    g.inputs = b;
    g.graph.capture([&] { g.output = body(g.inputs); });
    g.flags = pending_flags(g.device);  // the capture's, read with this replay's loss
  } else {
    // The batch into the graph's input tensors, ordered before the replay on its stream.
    kernels::backend(g.inputs.x).copy(b.x, g.inputs.x);
    kernels::backend(g.inputs.y).copy(b.y, g.inputs.y);
    for (const PendingFlag& f : g.flags) defer_flag_check(f.flag, f.message);
  }
  g.graph.replay();
  return g.output;
}

#else

struct GraphStep::Impl {};

GraphStep::GraphStep(Device) {
  fail(
      "--cuda-graph: this build of glass has no CUDA runtime (CMake found no CUDA toolkit; "
      "-DGLASS_CUDA_RUNTIME=emu emulates one)");
}
GraphStep::~GraphStep() = default;
bool GraphStep::captured() const { return false; }
size_t GraphStep::launches_per_replay() const { return 0; }
Tensor GraphStep::step(const Batch&, const Body&) { return {}; }

#endif

}  // namespace glass::train
