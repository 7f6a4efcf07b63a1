// --cuda-graph: the training step captured into a CUDA graph once and replayed every step
// (engine/cuda/graph.h). The first step() runs `body` under capture on the batch it is given,
// whose tensors become the graph's inputs; every later step() copies its batch into those tensors
// (a copy kernel on the graph's stream) and replays. The output (the step's status, optim/
// step_status.h) is the tensor the captured body returned: the graph writes it at each replay,
// and the caller reads it after step() (the step's host synchronisation). The capture allocates
// from the graph's private memory pool (engine/cuda/graph.h), so it needs no warm cache. The device
// flags the captured ops registered (bad token ids, engine/device_flags.h) are registered again
// after each replay, so a bad id in a later batch is still reported at that read.
//
// The graph's stream is current on the constructing thread for the object's whole life: make the
// GraphStep before any device work (the model's upload), so that all work is ordered on it and
// the caching allocator's blocks belong to it.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "engine/device.h"
#include "engine/device_flags.h"
#include "train/data.h"

namespace glass::train {

class GraphStep {
 public:
  // The captured work: from the step's batch to the tensor the host reads after each replay. It
  // may not read from the device or upload.
  using Body = std::function<Tensor(const Batch&)>;

  explicit GraphStep(Device device);  // cuda only
  ~GraphStep();

  bool captured() const;
  // Captures body on `b` (first call) or copies `b` into the captured inputs; then replays.
  Tensor step(const Batch& b, const Body& body);
  // The kernel launches of one replay.
  size_t launches_per_replay() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glass::train
