// Checkpoints: everything a run needs to continue bit-exactly, in one safetensors file.
//
//   model.<param>            the weights (f32)
//   optim.<buffer>.<param>   the optimizer's state buffers (AdamW: exp_avg, exp_avg_sq)
//   __metadata__             format, step, optimizer step and lr, RNG (seed, offset), data
//                            position, the model configuration, and the data file
//
// A checkpoint directory holds ckpt_<step>.safetensors files and `latest`, a one-line file naming
// the newest. Both are written atomically (temp file, fsync, rename): a crash while saving leaves
// the previous checkpoint intact and `latest` pointing at it.
#pragma once

#include <cstdint>
#include <string>

#include "nn/gpt.h"
#include "optim/optimizer.h"

namespace glass::train {

struct CheckpointState {
  int64_t step = 0;       // steps completed: the next step to run
  uint64_t rng_seed = 0;  // the dropout generator's Philox state
  uint64_t rng_offset = 0;
  int64_t data_position = 0;  // the batch index the next step reads
  GPTConfig config;
  std::string data_path;
};

// Writes DIR/ckpt_<step>.safetensors and then DIR/latest. Returns the checkpoint file's path.
std::string save_checkpoint(const std::string& dir, const CheckpointState& state, const GPT& model,
                            const Optimizer& optimizer);

struct LoadedCheckpoint {
  std::string path;
  CheckpointState state;
  NamedTensors model;      // names without the "model." prefix
  NamedTensors optimizer;  // names without the "optim." prefix
  std::map<std::string, double> optimizer_scalars;
};

// `where` is a checkpoint directory (its `latest` is followed) or a checkpoint file. A missing,
// truncated or foreign file throws glass::Error naming it and what is wrong.
LoadedCheckpoint load_checkpoint(const std::string& where);

}  // namespace glass::train
