// A step's micro-step batches (--grad-accum k) on the device, from one upload for the tokens and
// one for the targets: the k batches (on the host, i32 [rows, T] each) are stacked into one i32
// [k, rows, T] tensor for x and one for y, uploaded, and micro-step m reads row m (views). Two
// uploads whatever k is, so that a step's uploads (these two, AdamW's scalars, the dropout offset
// of a replay) fit the cuda device's staging ring (engine/cuda/memory.h) and the host never waits
// for a staging buffer in the middle of a step: host_syncs stays 1. The eager step and the
// --cuda-graph step (whose graph reads the stacked tensors as its inputs) both upload this way.
#pragma once

#include <vector>

#include "train/data.h"

namespace glass::train {

struct MicroBatches {
  Batch stacked;             // i32 [k, rows, T] each
  std::vector<Batch> micro;  // micro-step m's batch: row m of `stacked`, i32 [rows, T] views
};

// New device tensors holding the batches. Throws naming the batch when one is not an i32
// [rows, T] contiguous host tensor of the first one's shape.
MicroBatches upload_micro_batches(const std::vector<Batch>& host, Device device);

// The batches written into `stacked` in place (a replayed graph's inputs): the same checks, and
// the stacked shape must be `stacked`'s. No kernel is launched: on cuda, two ordered uploads.
void upload_micro_batches_into(const std::vector<Batch>& host, const Batch& stacked);

}  // namespace glass::train
