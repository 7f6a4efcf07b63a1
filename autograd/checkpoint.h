// checkpoint(): activation recomputation. A part of the forward keeps only its inputs for backward;
// backward runs that part's forward again and back-propagates through what the re-run recorded.
//
//   forward:   outs = fn(inputs)            recorded as usual, then the part's nodes are dropped:
//                                           outs hang from one "checkpoint" node whose edges are
//                                           the part's exits (the tensors it read from outside:
//                                           the inputs, parameters, older activations)
//   backward:  outs' = fn(inputs)           again, grad on, launches marked Phase::recompute, the
//                                           random generators put back where they stood, so that
//                                           dropout draws the same masks (same Philox offsets)
//              d(exits) = backward of outs' with d(outs), stopped at the exits
//
// The re-run is the same code with the same kernels on the same values, so outs' = outs and every
// gradient is bit-identical to running fn without the checkpoint, provided each exit's gradient
// from inside the part is one sum the outer backward adds in one place (true when every tensor
// read from outside is read by the part only, as a block's input or a parameter is).
// Memory: while the forward runs, the part's saved tensors live only until it returns; in backward,
// one part's at a time. Cost: fn's forward once more (hardware FLOPs: train/mfu.h's HFU).
#pragma once

#include <functional>
#include <vector>

#include "engine/rng.h"
#include "engine/tensor.h"

namespace glass {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

// Runs fn(inputs) as a checkpointed part of the tape (see above). `generators`: the random streams
// fn draws from (dropout's), replayed in backward. With grad mode off, or nothing needing a
// gradient, it is fn(inputs).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const std::vector<Generator*>& generators = {});

}  // namespace glass
