// Checkpoints: everything a run needs to continue bit-exactly, in one safetensors file.
//
//   model.<param>            the weights (f32)
//   optim.<buffer>.<param>   the optimizer's state buffers (AdamW: exp_avg, exp_avg_sq)
//   __metadata__             format, step, optimizer step and lr, RNG (seed, offset), data
//                            position, the model configuration, and the data file
//
// A checkpoint directory holds ckpt_<step>.safetensors files and `latest`, a one-line file naming
// the newest. Both are written atomically (temp file, fsync, rename): a crash while saving leaves
// the previous checkpoint intact and `latest` pointing at it. Older checkpoints are removed only
// after the new one and `latest` are complete (docs/reliability.md).
#pragma once

#include <cstdint>
#include <optional>
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
  // What a resumed run checks its flags and data against. Checkpoints written before these were
  // recorded load with 0 and nullopt.
  int64_t seq_len = 0;  // the sequence length T the run trained at (at most config.block_size)
  // The data's character vocabulary (char_vocab_metadata: its characters in hex); "" for token
  // data, which has none.
  std::optional<std::string> char_vocab;
};

// Writes DIR/ckpt_<step>.safetensors and then DIR/latest, then keeps only the newest `keep_last`
// checkpoints (0 = keep all). Returns the checkpoint file's path. A write that fails (a full disk,
// a file-size limit) throws glass::Error naming the step, the reason, and what `latest` still
// names; the failed file is removed and nothing older is touched.
std::string save_checkpoint(const std::string& dir, const CheckpointState& state, const CausalLM& model,
                            const Optimizer& optimizer, int64_t keep_last = 3);

// Removes from `dir` every ckpt_<step>.safetensors but the `keep_last` with the highest steps (0 =
// none removed) and never `keep_file`, plus the temp files that writers killed mid-write left
// behind (another process's `*.tmp.<pid>`).
void prune_checkpoints(const std::string& dir, int64_t keep_last, const std::string& keep_file);

// The file name `latest` in `dir` holds, or "" when there is none.
std::string latest_checkpoint_name(const std::string& dir);

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
