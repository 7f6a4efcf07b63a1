// Trainer: the training run that samples/train_gpt runs, as a library so that tests can drive it.
// It assembles the run from its parts and loops over the steps:
//
//   train/run_config.h  the flags, checked and typed (resolve), and the model's configuration
//   train/step.h        one step: forward, backward, clipping, AdamW (eager or a CUDA graph,
//                       accumulation, data parallel, the non-finite policy); no I/O
//   train/run_log.h     the progress lines, the --metrics JSONL and the summary
//
// and, here: the model, optimizer, data loaders and communicator built in dependency order, the
// pre-flight, checkpoints (save, resume), evaluation, profiling, the final save and the sample.
// Everything a step depends on (weights, optimizer state, step number, dropout RNG, data position)
// is in the checkpoint, so resuming at step k and training to n equals training to n in one go,
// bit for bit. With --dtype bf16 the step runs on the model's bf16 compute copies (nn/module.h)
// and the optimizer updates the f32 masters; the copies are cast afresh after each step, a pure
// function of the masters, so checkpoints (f32) resume bf16 runs bit-exactly too.
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
#include "train/run_config.h"
#include "train/run_log.h"
#include "train/step.h"

namespace glass::train {

class Trainer {
 public:
  explicit Trainer(const TrainOptions& options);
  ~Trainer();

  // One step (train/step.h), timed and profiled.
  StepResult train_step();
  // Where tests look into the steps (train/step.h): e.g. a NaN put into a gradient after backward.
  StepHooks& step_hooks() { return stepper_->hooks(); }
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
  // The f32 master weights, whole: the model's parameters, or under --zero 1 with bf16 (where
  // each rank keeps only its shard of them, comm/zero_adamw.h) a gathered copy, in which case
  // every rank must call it (collective).
  NamedTensors master_weights() const;
  const AdamW& optimizer() const { return *optimizer_; }
  DType dtype() const { return run_.dtype; }
  const RunConfig& run_config() const { return run_; }
  const Dataset& data() const { return data_; }
  comm::Communicator& communicator() const { return *comm_; }
  const comm::DataParallel* data_parallel() const { return ddp_.get(); }
  const GraphStep* graph() const { return graph_.get(); }  // --cuda-graph, else nullptr
  const Generator& dropout_generator() const { return dropout_gen_; }
  // The pre-flight's plan (nullopt under --no-preflight), and the peak in use measured after the
  // second step (-1 before it): the two figures the summary line compares.
  const std::optional<PreflightResult>& preflight_result() const { return preflight_; }
  int64_t measured_peak() const { return measured_peak_; }
  std::string save_checkpoint_now() const;

 private:
  // The constructor's steps, in order.
  void build_model(const std::optional<GPTWeights>& init);
  void build_optimizer_and_loaders();
  void restore(const LoadedCheckpoint& ck);
  void join_data_parallel(const std::optional<LoadedCheckpoint>& ck);
  void check_prompt() const;
  void preflight();
  void build_step();

  // After each micro-step's forward (StepHooks::after_forward): the profiled step's tape, and
  // --print-tape's.
  void on_forward(const Tensor& loss, int64_t micro);
  // save_checkpoint_now, timed as host work of the step just done (the report's timeline).
  std::string timed_checkpoint();
  // The profiler's report: what the step holds before it starts, and the run's numbers.
  LedgerState ledger_state() const;
  RunFacts run_facts() const;

  RunConfig run_;  // the flags, resolved (run_.options: their values)
  RunLog log_;
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
  std::unique_ptr<TrainProfiler> profiler_;
  std::optional<Mfu> mfu_;  // set by run(): measuring the host's peak takes a moment
  std::unique_ptr<comm::Communicator> comm_;  // `local` unless started by mpirun
  std::unique_ptr<comm::DataParallel> ddp_;   // with every backend but local
  // --cuda-graph (train/graph_step.h): the graph, its stream made current for the whole run.
  std::unique_ptr<GraphStep> graph_;
  // The captured step's tape (--cuda-graph with profiling): every replay launches the capture's
  // kernels with its node ids, so it is the tape of a recorded step that is a replay.
  std::vector<TapeNode> captured_tape_;
  std::string captured_tape_text_;      // and as --print-tape prints it
  std::unique_ptr<TrainStep> stepper_;  // the step, over the parts above
  // The pre-flight's plan (train/preflight.h; nullopt under --no-preflight), and the allocator's
  // peak after this run's second step (or its only one): the two figures the metrics compare.
  std::optional<PreflightResult> preflight_;
  int64_t measured_peak_ = -1;
};

}  // namespace glass::train
