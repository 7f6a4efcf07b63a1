// --cuda-graph: the training step captured into a CUDA graph once and replayed every step
// (engine/cuda/graph.h). step() takes the step's batches on the host (one per micro-step of
// --grad-accum) and uploads them stacked, one i32 [k, rows, T] tensor for x and one for y. The
// first step() keeps those tensors as the graph's inputs and runs `body` under capture on their
// rows (micro-step m reads row m); every later step() copies its upload into them (two copy
// kernels on the graph's stream) and replays. So each micro-step's tokens reach the graph through
// fixed device buffers, never as arguments baked into the capture. The output (the step's status, optim/
// step_status.h) is the tensor the captured body returned: the graph writes it at each replay,
// and the caller reads it after step() (the step's host synchronisation). The capture allocates
// from the graph's private memory pool (engine/cuda/graph.h), so it needs no warm cache. The device
// flags the captured ops registered (bad token ids, engine/device_flags.h) are registered again
// after each replay, so a bad id in a later batch is still reported at that read.
//
// Random numbers (dropout): the captured random ops draw from `rng` with offsets relative to a
// base in device memory (engine/rng.h: Generator::offsets_from_device). Before each replay the
// generator's offset is written there and the generator advanced on the host by what one step
// draws, so replay n uses the counters the eager step n would, and no two replays share a mask.
//
// The graph's stream is current on the constructing thread for the object's whole life: make the
// GraphStep before any device work (the model's upload), so that all work is ordered on it and
// the caching allocator's blocks belong to it.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/device_flags.h"
#include "engine/rng.h"
#include "train/data.h"

namespace glass::train {

class GraphStep {
 public:
  // The captured work: from the step's batches (one per micro-step) to the tensor the host reads
  // after each replay. It may not read from the device or upload.
  using Body = std::function<Tensor(const std::vector<Batch>&)>;

  // cuda only. `rng`: the generator the captured body draws random numbers from (or nullptr),
  // kept by the caller for the object's life.
  GraphStep(Device device, Generator* rng);
  ~GraphStep();

  bool captured() const;
  // Uploads `batches` (cpu tensors, i32 [rows, T] each); captures body on them (first call) or
  // copies them into the captured inputs (the same number of batches, of the captured shape);
  // then replays.
  Tensor step(const std::vector<Batch>& batches, const Body& body);
  // The kernel launches of one replay.
  size_t launches_per_replay() const;
  // The replays so far, and the Philox counter blocks each draws from rng.
  int64_t replays() const;
  uint64_t rng_blocks_per_replay() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace glass::train
