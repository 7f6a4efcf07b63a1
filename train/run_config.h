// The run's configuration: train_gpt's flags as the command line gives them (TrainOptions, one
// field per flag, choices as their spellings), and resolve(), which checks them and turns them
// into a RunConfig: the choices as typed values (device, dtype, architecture, attention kernel,
// recomputation, non-finite policy, save layout) and the model flags the user gave as
// std::optional, so that a flag left at its default yields to --init's file, --resume's
// checkpoint or a --model preset while a given one must agree with them. The spellings of the
// model flags are read in one place (resolve); everything after it reads the typed fields.
//
// resolve() is pure apart from asking which devices exist: no file is read and no model is built,
// so every refusal of a bad flag is testable on its own (tests/train/test_run_config.cpp). The
// model configuration that needs the files (resolve_model) is here too, for the same reason: it is
// the reconciliation of the flags with what the data, --init's weights and --resume's checkpoint
// hold, and it builds nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "engine/device.h"
#include "nn/gpt_config.h"
#include "nn/gpt_weights.h"
#include "nn/recompute.h"
#include "train/checkpoint.h"
#include "train/data.h"

namespace glass::train {

struct TrainOptions {
  std::string device = "auto";
  // f32, or bf16 mixed precision (README): bf16 copies of the f32 master weights for forward and
  // backward. "" = the device's default: bf16 on cuda, f32 on cpu and emu.
  std::string dtype;
  std::string data = "data/tinyshakespeare.txt";
  int64_t vocab_size = 0;  // token shards only
  // "" = the model's shape from the flags below; else a preset (GPTConfig::preset): "gpt2" =
  // GPT-2 124M (L=12, H=12, C=768, T=1024, V=50257 padded to 50304) on llm.c token shards of
  // GPT-2 tokens; "llama-tiny" and "stories15m", llamas with the data's vocabulary.
  std::string model;
  int64_t n_layer = 4, n_head = 4, n_embd = 256;
  // The architecture (nn/gpt_config.h: gpt2 | llama) and llama's own shape flags.
  std::string arch = "gpt2";
  int64_t n_kv_head = 0, ffn_hidden = 0;  // 0: n_head, and llama's 8C/3 rounding
  double rope_theta = 10000, norm_eps = 1e-5;
  std::string tie_embeddings = "on";  // on | off
  int64_t seq_len = 128, batch = 16, steps = 600;
  double lr = 1e-3, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  int64_t warmup = 20;
  std::string lr_schedule = "cosine";
  double grad_clip = 1.0;  // 0 = off
  double dropout = 0;
  uint64_t seed = 1337;
  bool shuffle = false;
  // f32 GEMMs on TF32 tensor cores (cuda; emulated on emu): faster, 10-bit input mantissas. Off,
  // so that f32 stays the reference. Sets the process-wide kernels::set_tf32.
  bool tf32 = false;
  // Weights in (any layout: nn/gpt_weights.h) and out (in the layout save_format names: glass,
  // hf or llmc).
  std::string init, save, save_format = "glass";
  // The spellings of the model flags set on the command line (--n-layer, --n-head, --n-embd,
  // --seq-len, --vocab-size, --dropout, --arch and llama's); the others are at their defaults.
  // resolve() reads them into RunConfig::given: --init's file must agree with the shape flags,
  // --resume's checkpoint with all of them; with --resume, --seq-len when not given is the
  // checkpoint's.
  std::vector<std::string> shape_flags_given;
  std::string checkpoint_dir, resume;  // directories (or a checkpoint file for resume)
  int64_t checkpoint_every = 0;        // 0 = only at the end (when checkpoint_dir is set)
  int64_t keep_last = 3;               // checkpoints kept in checkpoint_dir, the newest (0 = all)
  // A step whose loss or gradient norm is NaN or infinite: "stop" ends the run naming the step
  // and the first node that produced the value; "skip" drops the step (weights and optimizer
  // moments untouched) and carries on. Either way the value never reaches the weights.
  std::string on_nonfinite = "stop";
  std::string metrics;  // JSONL path
  int64_t eval_every = 100, eval_batches = 8;
  // Generation after training (train/generate.h): `sample` tokens (characters of text data)
  // after `prompt` ("": a newline, or <|endoftext|> for GPT-2 tokens), with a KV cache, decoded
  // with the data's tokenizer; --seed makes it deterministic.
  int64_t sample = 400;
  std::string prompt;
  double temperature = 1.0;  // 0 = the most likely token every time
  int64_t top_k = 0;         // 0 = all tokens
  int threads = 0;           // 0 = all cores
  // The kernel behind causal attention: auto (cpu: flash; emu and cuda: flash-mma for bf16 with
  // head dim 32, 64 or 128, else flash-simt, naive where the head dim suits neither) | naive |
  // flash (the device's best hand-written one) | flash-simt | flash-mma | cudnn (autograd/ops.h:
  // AttentionKernel).
  std::string attention = "auto";
  // Activation recomputation (nn/recompute.h, docs/memory.md): none | gelu | mlp | block.
  std::string recompute = "none";
  // cuda: capture the training step (forward, backward, clipping, AdamW, the bf16 copies) into a
  // CUDA graph after one eager warm-up step, and replay it every step (README, engine/cuda/
  // graph.h). With data parallelism every rank captures its own graph, the gradient all-reduces
  // in it; with --grad-accum k the graph holds all k micro-steps, and dropout reads its Philox
  // offsets from device memory written before each replay.
  bool cuda_graph = false;
  bool print_tape = false;
  bool quiet = false;  // no per-step progress lines
  // Profiling (docs/profiling.md): Chrome trace and HTML report of the steps in profile_steps.
  std::string trace, report, profile_steps;
  // Data parallelism under mpirun (comm/, train/distributed.h): --batch is the global batch.
  double comm_bucket_mb = 25;   // gradient bucket size
  int64_t grad_accum = 1;       // micro-steps per optimizer step; gradients reduced on the last
  double comm_timeout_s = 300;  // longest wait for a collective (a dead rank) before failing
  std::string comm_backend = "auto";  // or local | mpi | nccl (comm/communicator.h)
  // ZeRO stage (comm/zero_adamw.h): 0, or 1 = each rank keeps 1/N of AdamW's moments and updates
  // 1/N of the master weights (reduce-scatter, sharded update, all-gather). One rank: nothing to
  // shard, the same as 0.
  int zero = 0;
  // Before step 1, plan the step on meta and refuse it when its peak exceeds the device's free
  // memory, naming the remedies that fit (train/preflight.h; train_gpt --no-preflight: false).
  bool preflight = true;
};

// --on-nonfinite: what a step whose loss or gradient norm is NaN or infinite does.
enum class NonFinitePolicy { stop, skip };
const char* nonfinite_policy_name(NonFinitePolicy p);  // "stop" | "skip"

// The model flags given on the command line, each with its value; nullopt: left at its default,
// which yields to --init's file, --resume's checkpoint or the preset.
struct GivenModelFlags {
  std::optional<int64_t> n_layer, n_head, n_embd, seq_len, vocab_size;
  std::optional<double> dropout;
  std::optional<Arch> arch;
  std::optional<int64_t> n_kv_head, ffn_hidden;  // llama
  std::optional<double> rope_theta, norm_eps;    // llama
  std::optional<bool> tie_embeddings;            // llama
};

struct RunConfig {
  // The flags' numbers and paths, read from here. A --model preset has set its architecture and
  // vocabulary in them (and --resume sets the checkpoint's sequence length, resolve_model). The
  // choices below are read typed, never from the strings that spelled them.
  TrainOptions options;
  Device device;               // --device, "auto" resolved, under mpirun this rank's GPU
  DType dtype = DType::f32;    // the compute dtype; the master weights are f32 either way
  Arch arch = Arch::gpt2;      // --arch, or the preset's
  bool tie_embeddings = true;  // llama: --tie-embeddings on
  AttentionKernel attention = AttentionKernel::automatic;  // as asked; resolved per head dim
  Recompute recompute = Recompute::none;
  NonFinitePolicy on_nonfinite = NonFinitePolicy::stop;
  WeightLayout save_format = WeightLayout::glass;
  GivenModelFlags given;
};

// Checks the flags whose values are wrong whatever the data and files (each error names the flag
// and its value, never the field it ends up in), picks the device and dtype, and applies --model's
// preset. Throws glass::Error on the first bad flag.
RunConfig resolve(const TrainOptions& options);

// The model's configuration: from --resume's checkpoint, --init's weights (`init->state` may grow
// to the preset's padded vocabulary), the preset or the flags, each checked against the flags
// given and against the data; `data` gets a llama's special tokens (train/data.h). With --resume,
// run.options.seq_len becomes the checkpoint's unless --seq-len was given.
GPTConfig resolve_model(RunConfig& run, Dataset& data, const LoadedCheckpoint* resume,
                        GPTWeights* init);

// The model configuration the flags describe, with `vocab` classes.
GPTConfig config_from_flags(const RunConfig& run, int64_t vocab);

}  // namespace glass::train
