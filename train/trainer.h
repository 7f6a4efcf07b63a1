// Trainer: the training loop that samples/train_gpt runs, as a library so that tests can drive it.
//
// One step: read the step's batch -> forward -> cross-entropy -> backward -> clip the global
// gradient norm -> set the scheduled learning rate -> AdamW -> zero the gradients. Everything a
// step depends on (weights, optimizer state, step number, dropout RNG, data position) is in the
// checkpoint, so resuming at step k and training to n equals training to n in one go, bit for bit.
// With --dtype bf16 the step runs on the model's bf16 compute copies (nn/module.h) and the
// optimizer updates the f32 masters; the copies are cast afresh after each step, a pure function
// of the masters, so checkpoints (f32) resume bf16 runs bit-exactly too.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/data_parallel.h"
#include "nn/gpt.h"
#include "nn/gpt_weights.h"
#include "optim/adamw.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/generate.h"
#include "train/mfu.h"
#include "train/preflight.h"
#include "train/profiler.h"

namespace glass::train {

class GraphStep;
struct RowRange;

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
  // The model flags set on the command line (of --n-layer, --n-head, --n-embd, --seq-len,
  // --vocab-size, --dropout); the others are at their defaults. --init's file must agree with the
  // shape flags, --resume's checkpoint with all of them; with --resume, --seq-len when not given
  // is the checkpoint's.
  std::vector<std::string> shape_flags_given;
  std::string checkpoint_dir, resume;  // directories (or a checkpoint file for resume)
  int64_t checkpoint_every = 0;        // 0 = only at the end (when checkpoint_dir is set)
  int64_t keep_last = 3;               // checkpoints kept in checkpoint_dir, the newest (0 = all)
  // A step whose loss or gradient norm is NaN or infinite: "stop" ends the run naming the step
  // and the first node that produced the value; "skip" drops the step (weights and optimizer
  // moments untouched) and carries on. Either way the value never reaches the weights.
  std::string on_nonfinite = "stop";
  // Tests only: after backward of this (1-based) step, one gradient element becomes NaN. 0 = off.
  int64_t test_inject_nan_step = 0;
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

struct StepResult {
  int64_t step = 0;  // 1-based number of the step just done
  double loss = 0, lr = 0, grad_norm = 0, ms = 0, tokens_per_s = 0;
  // Times the host waited for the device during the step (engine/launch.h, note_host_sync): 1,
  // the step status (loss, gradient norm and the finite gate, optim/step_status.h) read in one
  // copy at the end; 0 on cpu, which never waits.
  int64_t host_syncs = 0;
  bool skipped = false;  // non-finite loss or gradients under --on-nonfinite skip: no update
};

class Trainer {
 public:
  explicit Trainer(const TrainOptions& options);
  ~Trainer();

  StepResult train_step();
  // Mean loss over `batches` consecutive batches of the held-out split (no dropout, no grad).
  double evaluate(int64_t batches);
  // `n` tokens sampled from the model after --prompt, with --temperature and --top-k, and the
  // text they decode to (the data's tokenizer; throws when the data has none).
  struct Sample {
    Generation generation;
    std::string text;
  };
  Sample sample(int64_t n, uint64_t seed, bool kv_cache = true);
  // Runs the remaining steps with logging, evaluation, checkpoints, final save and sample. After
  // SIGINT or SIGTERM (train/shutdown.h) it stops after the current step, writes a checkpoint when
  // checkpoint_dir is set, says where, and returns; stopped_by_signal() then names the signal.
  void run();
  int stopped_by_signal() const { return stopped_by_signal_; }
  const std::vector<int64_t>& skipped_steps() const { return skipped_steps_; }

  int64_t step() const { return step_; }
  const CausalLM& model() const { return *model_; }
  const AdamW& optimizer() const { return *optimizer_; }
  DType dtype() const { return dtype_; }
  const Dataset& data() const { return data_; }
  comm::Communicator& communicator() const { return *comm_; }
  const comm::DataParallel* data_parallel() const { return ddp_.get(); }
  const GraphStep* graph() const { return graph_.get(); }  // --cuda-graph, else nullptr
  const Generator& dropout_generator() const { return dropout_gen_; }
  std::string save_checkpoint_now() const;

 private:
  // The constructor's steps, in order.
  void apply_model_preset();
  void choose_config(std::optional<LoadedCheckpoint>& ck, std::optional<GPTWeights>& init);
  AttentionKernel build_model(const std::optional<GPTWeights>& init);
  void build_optimizer_and_loaders();
  void restore(const LoadedCheckpoint& ck);
  void join_data_parallel(const std::optional<LoadedCheckpoint>& ck);
  void log_setup(AttentionKernel attention) const;
  void check_prompt() const;
  void preflight();

  void log_step(const StepResult& r, std::optional<double> val_loss);
  // The step's parts. forward_backward returns the micro-steps' loss sum (micro_step: one
  // micro-step's forward and backward, also the body --cuda-graph captures); finish_step_on_device
  // queues the norm (and clipping), the step status, the gated AdamW, zero_grad and the bf16
  // copies, and returns the status (optim/step_status.h). No host read in either: --cuda-graph
  // captures them (graph_step: the captured step, replayed from the second call on).
  Tensor forward_backward(const RowRange& rows);
  std::vector<Batch> host_micro_batches(const RowRange& rows) const;
  // The micro-steps' forward and backward on the batches batch_of gives (the eager step's and the
  // captured step's loop); returns the sum of their losses.
  Tensor accumulate_micro_steps(const std::function<Batch(int64_t micro)>& batch_of);
  Tensor micro_step(const Batch& b, int64_t micro);
  Tensor finish_step_on_device(const Tensor& loss_sum, double lr);
  Tensor graph_step(const RowRange& rows, double lr);
  StepResult end_step(StepResult& r, std::chrono::steady_clock::time_point t0,
                      uint64_t syncs_before);
  void stage_test_nan();   // test_inject_nan_step: the value the step adds, into device memory
  void inject_test_nan();  // ... added to one gradient element on the device
  // Runs the step's forward and backward again in anomaly mode (GLASS_CHECK_NAN) from the dropout
  // state it started with, and returns the error naming the first node that made a NaN/Inf.
  std::string locate_nonfinite(uint64_t rng_offset);
  // The profiler's report: what the step holds before it starts, and the run's numbers.
  LedgerState ledger_state() const;
  RunFacts run_facts() const;

  TrainOptions opt_;
  Device device_;
  DType dtype_ = DType::f32;  // the compute dtype (the master weights are f32 either way)
  Dataset data_;
  GPTConfig config_;
  Generator dropout_gen_;
  std::unique_ptr<CausalLM> model_;
  std::unique_ptr<AdamW> optimizer_;
  LrSchedule schedule_;
  std::unique_ptr<BatchLoader> loader_, val_loader_;
  int64_t step_ = 0;
  int64_t first_step_ = 0;  // the step this run started at (0, or the resumed checkpoint's)
  int threads_ = 0;         // the cpu threads this run uses (--threads, 0 resolved)
  int stopped_by_signal_ = 0;
  std::vector<int64_t> skipped_steps_;  // 1-based numbers of the steps --on-nonfinite skip dropped
  std::ofstream metrics_;
  std::unique_ptr<TrainProfiler> profiler_;
  std::optional<Mfu> mfu_;  // set by run(): measuring the host's peak takes a moment
  std::unique_ptr<comm::Communicator> comm_;  // `local` unless started by mpirun
  std::unique_ptr<comm::DataParallel> ddp_;   // with every backend but local
  // --cuda-graph (train/graph_step.h): the graph, its stream made current for the whole run, and
  // what the captured step reads and writes.
  std::unique_ptr<GraphStep> graph_;
  Tensor test_nan_;  // test_inject_nan_step: f32 [1], NaN at that step, else 0
  // The pre-flight's plan (train/preflight.h; nullopt under --no-preflight), and the allocator's
  // peak after this run's second step (or its only one): the two figures the metrics compare.
  std::optional<PreflightResult> preflight_;
  int64_t measured_peak_ = -1;
};

}  // namespace glass::train
