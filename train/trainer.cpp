#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstdlib>

#include "autograd/ops.h"
#include "autograd/tape_record.h"
#include "comm/zero_adamw.h"
#include "engine/allocator.h"
#include "engine/atomic_file.h"
#include "engine/device_runtime.h"
#include "engine/launch.h"
#include "engine/log.h"
#include "kernels/backend.h"
#include "kernels/cpu/hardware_peak.h"
#include "kernels/cpu/threads.h"
#include "kernels/peaks.h"
#include "nn/gpt_weights.h"
#include "nn/llama2c_tokenizer.h"
#include "train/checkpoint.h"
#include "train/distributed.h"
#include "train/gpt_cost.h"
#include "train/graph_step.h"
#include "train/shutdown.h"

namespace glass::train {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

AdamWOptions adamw_options(const TrainOptions& o) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay};
}

// --zero 1: a checkpoint needs the sharded moments whole, and --save and checkpoints the sharded
// f32 masters of a bf16 run. Every rank gathers them where rank 0 saves, and drops the copy once
// saved (or at once, on the other ranks).
void gather_sharded_state(AdamW& optimizer) {
  if (auto* zero = dynamic_cast<comm::ZeroAdamW*>(&optimizer)) zero->gather_state();
}
void drop_gathered_state(AdamW& optimizer) {
  if (auto* zero = dynamic_cast<comm::ZeroAdamW*>(&optimizer)) zero->drop_gathered_state();
}

}  // namespace

// Construction in the order the pieces depend on each other; each step is a method below.
Trainer::Trainer(const TrainOptions& options)
    : run_(resolve(options)),  // a bad flag fails now, not after training
      log_(run_.options.steps, run_.options.quiet) {
  const TrainOptions& o = run_.options;
  // The kernel ladders are emu's and cuda's: on cpu a (valid) selection would change nothing, and
  // a learner comparing rungs by step time should hear so rather than see equal times.
  if (!capabilities(run_.device).kernel_ladders && std::getenv("GLASS_KERNEL_VARIANT") != nullptr)
    log().warn(
        "GLASS_KERNEL_VARIANT selects rungs of the emu and cuda kernels; cpu runs its own "
        "kernels, so it changes nothing here");
  // Before any device work: the graph's stream is current from here on (train/graph_step.h).
  // The captured dropout draws from dropout_gen_ (set in build_model; its address is fixed).
  if (o.cuda_graph) graph_ = std::make_unique<GraphStep>(run_.device, &dropout_gen_);
  kernels::set_tf32(o.tf32);
  threads_ = kernels::cpu::set_threads(o.threads);
  data_ = load_dataset(o.data, o.vocab_size);
  std::optional<LoadedCheckpoint> ck;
  std::optional<GPTWeights> init;
  if (!o.resume.empty())
    ck = load_checkpoint(o.resume);
  else if (!o.init.empty())
    init = load_gpt_weights(o.init);
  config_ = resolve_model(run_, data_, ck ? &*ck : nullptr, init ? &*init : nullptr);
  if (!o.save.empty()) check_layout_holds(run_.save_format, config_.arch);
  check_prompt();
  // The ranks are known before the model is built: the pre-flight plans one rank's step.
  comm_ = comm::make_communicator(run_.device, {o.comm_timeout_s, o.comm_backend});
  // The attention kernel this model's head dim gets, checked for the run's device before the
  // pre-flight plans it (its error, not meta's).
  const AttentionKernel attention =
      resolve_attention_kernel(run_.attention, run_.device, run_.dtype, config_.head_dim());
  check_attention_kernel(attention, run_.device, run_.dtype, config_.head_dim());
  if (o.preflight) preflight();  // before anything big is allocated
  build_model(init);
  build_optimizer_and_loaders();
  if (ck) restore(*ck);
  first_step_ = step_;  // --cuda-graph: this run's first step is its eager warm-up
  profiler_ = std::make_unique<TrainProfiler>(ProfileOptions{o.trace, o.report, o.profile_steps},
                                              step_ + 1, o.steps, run_.device);
  join_data_parallel(ck);
  // Mixed precision: bf16 compute copies of the (now final) master weights. Under --zero 1 each
  // rank then keeps the masters of its shard only (comm/zero_adamw.h).
  if (run_.dtype != DType::f32) model_->set_compute_dtype(run_.dtype);
  if (auto* zero = dynamic_cast<comm::ZeroAdamW*>(optimizer_.get());
      zero != nullptr && run_.dtype != DType::f32)
    zero->shard_masters(model_->parameter_copies());
  build_step();
  if (comm_->rank() == 0) {  // rank 0 writes the files for all ranks
    if (!o.metrics.empty()) log_.open_metrics(o.metrics);
    check_output_file("--save", o.save);
    check_output_file("--trace", o.trace);
    check_output_file("--report", o.report);
  }
  log_.setup(run_, threads_, data_, config_, model_->num_parameters(), attention, preflight_);
}

// The model, initialised from --seed (or --init's weights), on the device, with its attention
// kernel and recomputation.
void Trainer::build_model(const std::optional<GPTWeights>& init) {
  dropout_gen_ = Generator(run_.options.seed ^ 0x9E3779B97F4A7C15ull);
  model_ = make_model(config_, dropout_gen_);
  Generator init_gen(run_.options.seed);
  model_->init(init_gen);  // on cpu: Philox gives every device the same numbers anyway
  model_->to(run_.device);
  if (init) model_->load_state_dict(init->state);
  model_->set_attention(run_.attention);
  model_->set_recompute(run_.recompute);
}

void Trainer::build_optimizer_and_loaders() {
  const TrainOptions& o = run_.options;
  // --zero 1: join_data_parallel builds it, over the shards of the gradient buckets.
  if (o.zero == 0)
    optimizer_ = std::make_unique<AdamW>(model_->named_parameters(), adamw_options(o));
  // A run shorter than the warmup warms up over the whole run.
  schedule_ = LrSchedule::parse(o.lr_schedule, o.lr, std::min(o.warmup, o.steps), o.steps);
  loader_ = std::make_unique<BatchLoader>(&data_.train, o.batch, o.seq_len, o.shuffle, o.seed);
  if (static_cast<int64_t>(data_.val.size()) > o.seq_len)
    val_loader_ = std::make_unique<BatchLoader>(&data_.val, o.batch, o.seq_len, false, 0);
}

// Weights, optimizer state, dropout RNG and step from a checkpoint.
void Trainer::restore(const LoadedCheckpoint& ck) {
  model_->load_state_dict(ck.model);
  if (optimizer_) optimizer_->load_state(ck.optimizer, ck.optimizer_scalars);
  dropout_gen_.set_state(ck.state.rng_seed, ck.state.rng_offset);
  step_ = ck.state.step;
  log().info("resumed from {} at step {}", ck.path, step_);
}

// Data parallelism: under mpirun every rank holds a replica and starts from rank 0's weights.
void Trainer::join_data_parallel(const std::optional<LoadedCheckpoint>& ck) {
  const TrainOptions& o = run_.options;
  check_same_run(*comm_, o, config_);
  rows_of_rank(o.batch, comm_->rank(), comm_->size());  // fails now when N does not divide B
  if (std::string(comm_->backend()) != "local") {
    ddp_ = std::make_unique<comm::DataParallel>(*comm_, model_->named_parameters(),
                                                o.comm_bucket_mb, o.zero == 1);
    ddp_->broadcast_parameters();
    if (comm_->rank() != 0) log().set_level(spdlog::level::warn);  // rank 0 speaks for all
    log().info("data parallel: {} ranks ({} backend), gradient buckets: {}{}", comm_->size(),
               comm_->backend(), ddp_->buckets().size(),
               o.zero == 1 ? ", ZeRO-1: optimizer state sharded" : "");
  }
  if (optimizer_) return;
  // --zero 1: AdamW over this rank's shard; in a world of one there is nothing to shard.
  if (ddp_)
    optimizer_ =
        std::make_unique<comm::ZeroAdamW>(model_->named_parameters(), adamw_options(o), *ddp_);
  else
    optimizer_ = std::make_unique<AdamW>(model_->named_parameters(), adamw_options(o));
  if (ck) optimizer_->load_state(ck->optimizer, ck->optimizer_scalars);
  if (const auto* zero = dynamic_cast<const comm::ZeroAdamW*>(optimizer_.get()))
    log().info("ZeRO-1: AdamW moments{} {:.2f} MiB on each rank ({} of {} parameters' elements)",
               run_.dtype != DType::f32 ? " and f32 master weights" : "",
               (run_.dtype != DType::f32 ? 12.0 : 8.0) * static_cast<double>(zero->shard_numel()) /
                   (1 << 20),
               zero->shard_numel(), model_->num_parameters());
}

// The step this rank will run, planned on meta against the device's free memory.
void Trainer::preflight() {
  const TrainOptions& o = run_.options;
  PreflightRun run;
  run.device = run_.device;
  run.world = comm_->size();
  run.zero = o.zero;
  const RowRange rows = rows_of_rank(o.batch, comm_->rank(), comm_->size());
  StepPlanOptions& p = run.plan;
  p.config = config_;
  p.batch = rows.end - rows.begin;
  p.seq_len = o.seq_len;
  p.grad_accum = o.grad_accum;
  p.recompute = recompute_name(run_.recompute);
  p.dtype = run_.dtype;
  // Meta plans the emu and cuda kernels: a cpu run and cuDNN's attention (which keeps what flash
  // attention keeps, the LSE) are planned with meta's own choice.
  p.attention = capabilities(run_.device).cuda_kernels && run_.attention != AttentionKernel::cudnn
                    ? attention_kernel_name(run_.attention)
                    : "auto";
  p.tf32 = o.tf32;
  p.grad_clip = o.grad_clip;
  p.cuda_graph = o.cuda_graph;
  preflight_ = run_preflight(run);
}

// The step over the parts built above; the profiler and --print-tape watch its forward.
void Trainer::build_step() {
  stepper_ = std::make_unique<TrainStep>(run_, StepParts{.model = model_.get(),
                                                         .optimizer = optimizer_.get(),
                                                         .loader = loader_.get(),
                                                         .dropout = &dropout_gen_,
                                                         .comm = comm_.get(),
                                                         .ddp = ddp_.get(),
                                                         .graph = graph_.get()});
  stepper_->hooks().after_forward = [this](const Tensor& loss, int64_t micro) {
    on_forward(loss, micro);
  };
  stepper_->hooks().host_span = [this](const HostSpan& span) { profiler_->host_span(span); };
}

void Trainer::on_forward(const Tensor& loss, int64_t micro) {
  if (micro != 0) return;
  // The recorded (profiled) step's tape, with the node ids its trace and report show; without
  // profiling, --print-tape prints the first step's. --cuda-graph: the captured step's tape is
  // kept for a recorded step that replays it (train_step).
  if (profiler_->records_tape(step_ + 1)) profiler_->set_tape(record_tape(loss));
  if (capturing_graph() && profiler_->enabled()) {
    captured_tape_ = record_tape(loss);
    if (run_.options.print_tape) captured_tape_text_ = tape_string(loss, true);
  }
  if (run_.options.print_tape &&
      (profiler_->enabled() ? profiler_->records_tape(step_ + 1) : step_ == first_step_))
    fmt::print("tape of step {}:\n{}", step_ + 1, tape_string(loss, true));
}

StepResult Trainer::train_step() {
  // The report's gradient norms of the recorded step's tape: from a pass of its own, before the
  // step and outside the trace (TrainStep::tape_with_grad_norms). Under data parallelism every
  // rank runs it on its own rows without any all-reduce; rank 0's are the ones the report shows.
  if (profiler_->wants_grad_norms(step_ + 1))
    profiler_->run_unobserved(
        [&] { profiler_->set_grad_norm_tape(stepper_->tape_with_grad_norms(step_)); });
  // A replayed step runs no forward on the host (on_forward sees only the capture): its tape is
  // the captured one.
  if (profiler_->records_tape(step_ + 1) && graph_ && graph_->captured()) {
    profiler_->set_tape(captured_tape_);
    if (run_.options.print_tape) fmt::print("tape of step {}:\n{}", step_ + 1, captured_tape_text_);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t syncs_before = host_sync_count();
  profiler_->begin_step(step_ + 1);
  StepResult r = stepper_->run(step_, schedule_.at(step_));  // throws under --on-nonfinite stop
  if (r.skipped) skipped_steps_.push_back(step_ + 1);
  ++step_;
  r.step = step_;
  // The measured peak beside the pre-flight's planned one: after the second step (the first of a
  // --cuda-graph run is its eager warm-up, and the second has run the step as the first left it).
  // In use, as the pre-flight plans it: allocated, and a graph's private pool whole.
  if (step_ - first_step_ <= 2)
    measured_peak_ = Allocator::for_device(run_.device).stats().peak_in_use_bytes;
  r.host_syncs = static_cast<int64_t>(host_sync_count() - syncs_before);
  r.ms = ms_since(t0);
  const TrainOptions& o = run_.options;
  r.tokens_per_s = static_cast<double>(o.batch * o.seq_len * o.grad_accum) / (r.ms / 1000.0);
  profiler_->end_step({r.step, r.ms, r.tokens_per_s, r.host_syncs}, r.loss);
  return r;
}

Trainer::~Trainer() = default;

NamedTensors Trainer::master_weights() const {
  auto* zero = dynamic_cast<comm::ZeroAdamW*>(optimizer_.get());
  if (zero == nullptr || !zero->masters_sharded()) return model_->named_parameters();
  zero->gather_state();
  NamedTensors whole;  // handles of their own: the gathered storage outlives the release below
  for (const auto& [name, p] : model_->named_parameters()) whole.emplace_back(name, p.detach());
  zero->drop_gathered_state();
  return whole;
}

// What the step holds before it starts: the weights forward reads, the f32 masters behind bf16
// copies, and AdamW's moments (train/memory_ledger.h).
LedgerState Trainer::ledger_state() const {
  LedgerState s;
  const Allocator& allocator = Allocator::for_device(run_.device);
  auto bytes = [&allocator](const Tensor& t) {
    return static_cast<int64_t>(allocator.class_of(t.storage()->nbytes));
  };
  const std::vector<Tensor> copies = model_->compute_copies();
  const auto* zero = dynamic_cast<const comm::ZeroAdamW*>(optimizer_.get());
  // Sharded masters (--zero 1, bf16): the parameters hold no masters, the optimizer does.
  if (zero == nullptr || !zero->masters_sharded())
    for (const Tensor& p : model_->parameters()) {
      (copies.empty() ? s.parameters : s.master_weights) += bytes(p);
      s.storages.insert(p.storage().get());
    }
  for (const Tensor& c : copies) {
    s.parameters += bytes(c);
    s.storages.insert(c.storage().get());
  }
  // --zero 1: this rank's shards (moments, then the masters when sharded), not the gathered copy.
  std::vector<Tensor> held;
  if (zero != nullptr)
    held = zero->held_state();
  else
    for (const auto& [name, t] : optimizer_->state_tensors()) held.push_back(t);
  for (size_t i = 0; i < held.size(); ++i) {
    const Tensor& t = held[i];
    if (!t.defined() || t.numel() == 0) continue;
    (zero != nullptr && i == 2 ? s.master_weights : s.optimizer_moments) += bytes(t);
    s.storages.insert(t.storage().get());
  }
  return s;
}

// The summary's numbers that do not come from the launches (train/report.h).
RunFacts Trainer::run_facts() const {
  const TrainOptions& o = run_.options;
  RunFacts f;
  f.model = config_.str();
  f.device = run_.device.str();
  f.dtype = run_.dtype == DType::f32 ? "f32" : "bf16 (f32 master weights)";
  f.tokens_per_step = static_cast<double>(o.batch * o.seq_len * o.grad_accum);
  const DevicePeaks peaks = kernels::peaks_for(run_.device);
  f.peak_dtype = peaks.bf16_flops > 0 ? run_.dtype : DType::f32;
  if (mfu_) {
    f.model_flops_per_token = mfu_->flops_per_token;
    f.mfu_formula = mfu_->formula;
  }
  const AllocatorStats mem = Allocator::for_device(run_.device).stats();
  f.peak_allocated_bytes = mem.peak_allocated_bytes;
  f.peak_reserved_bytes = mem.peak_reserved_bytes;
  // The cost model's budget of this rank's step (train/gpt_cost.h), as this run runs it.
  const int64_t rows = o.batch / comm_->size();
  const Capabilities& can = capabilities(run_.device);
  const GptMemoryBudget budget =
      gpt_memory_budget(config_, o.batch, o.seq_len, run_.dtype,
                        {.flash_attention = run_.attention != AttentionKernel::naive,
                         .fused_classifier = can.fused_classifier,
                         .gemm_workspace = can.gemm_workspace,
                         .recompute = run_.recompute,
                         .world = comm_->size(),
                         .zero = o.zero,
                         .size_classes = SizeClasses::of_device(run_.device)});
  f.predicted_peak_bytes = budget.total_bytes();
  constexpr double MiB = 1 << 20;
  f.predicted_source = fmt::format(
      "the cost model (train/gpt_cost.h) for batch {} x {}, at {}: parameters {:.1f} + gradients "
      "{:.1f} + masters {:.1f} + AdamW {:.1f} + activations {:.1f} + temporaries {:.1f} + "
      "recomputed {:.1f} + gradient buckets {:.1f} + GEMM workspace {:.1f} + size classes {:.1f} "
      "MiB{}",
      rows, o.seq_len, budget.peak_at, budget.parameters_bytes / MiB, budget.gradients_bytes / MiB,
      budget.master_bytes / MiB, budget.adam_bytes / MiB, budget.activations_bytes / MiB,
      budget.temporaries_bytes / MiB, budget.recompute_bytes / MiB,
      budget.gradient_buckets_bytes / MiB, budget.workspace_bytes / MiB,
      budget.size_class_bytes / MiB,
      preflight_ ? fmt::format("; the pre-flight planned {:.1f} MiB on meta",
                               static_cast<double>(preflight_->planned_peak_bytes) / MiB)
                 : std::string());
  return f;
}

double Trainer::evaluate(int64_t batches) {
  GLASS_CHECK(val_loader_ != nullptr,
              "evaluate: the held-out split of {} is shorter than one "
              "sequence",
              data_.path);
  NoGradGuard no_grad;
  model_->train(false);
  double total = 0;
  for (int64_t i = 0; i < batches; ++i)
    total += item(batch_loss(*model_, val_loader_->batch(i, run_.device)));
  model_->train(true);
  return total / static_cast<double>(batches);
}

// --prompt is encoded at start-up too, so that a character outside the vocabulary fails before
// the training rather than after it. Without a tokenizer run() samples nothing (and says so).
void Trainer::check_prompt() const {
  const TrainOptions& o = run_.options;
  if (o.sample == 0 || o.prompt.empty() || data_.tokenizer == nullptr) return;
  try {
    sample_context(*data_.tokenizer, o.prompt);
  } catch (const Error& e) {
    fail("--prompt: {}", e.what());
  }
}

Trainer::Sample Trainer::sample(int64_t n, uint64_t seed, bool kv_cache) {
  const TrainOptions& o = run_.options;
  GLASS_CHECK(
      data_.tokenizer != nullptr,
      "sampling: no tokenizer for the tokens of {} (vocabulary {}): GPT-2 tokens (50257) "
      "need GPT-2's vocabulary (scripts/setup.sh) or a gpt2_tokenizer.bin beside the shards",
      data_.path, data_.vocab_size);
  Sample s;
  s.generation = generate(*model_, sample_context(*data_.tokenizer, o.prompt), n,
                          {o.temperature, o.top_k, seed}, kv_cache);
  s.text = without_partial_utf8_tail(data_.tokenizer->decode(s.generation.tokens));
  return s;
}

std::string Trainer::save_checkpoint_now() const {
  const TrainOptions& o = run_.options;
  CheckpointState s;
  s.step = step_;
  s.rng_seed = dropout_gen_.seed();
  s.rng_offset = dropout_gen_.offset();
  s.data_position = step_;
  s.config = config_;
  s.data_path = data_.path;
  s.seq_len = o.seq_len;
  s.char_vocab = data_.vocab ? char_vocab_metadata(*data_.vocab) : "";
  return save_checkpoint(o.checkpoint_dir, s, *model_, *optimizer_, o.keep_last);
}

// A checkpoint after step step_, its writing a host span of that step (the timeline's band).
std::string Trainer::timed_checkpoint() {
  const double from = launch_clock_us();
  std::string path = save_checkpoint_now();
  profiler_->host_span(
      {"checkpoint: write", "checkpoint", from, launch_clock_us(), step_, run_.device});
  return path;
}

void Trainer::run() {
  const TrainOptions& o = run_.options;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = step_;
  const bool root = comm_->rank() == 0;  // evaluates, logs, checkpoints and saves for all ranks
  double last_loss = NAN, tokens = 0, train_ms = 0;
  std::optional<double> val_loss;
  // MFU against the peak of the step's math: bf16 tensor cores where the device has such a peak;
  // cpu and emu have none (emu does bf16 GEMMs in f32 on the host), so their f32 peak.
  const DevicePeaks peaks = kernels::peaks_for(run_.device);
  mfu_ = with_recompute(
      gpt_mfu(config_, o.seq_len, peaks, peaks.bf16_flops > 0 ? run_.dtype : DType::f32), config_,
      o.seq_len, run_.recompute,
      capabilities(run_.device).cuda_kernels || run_.dtype == DType::bf16);
  log().info("{}", mfu_->formula);
  // The host's peak counts every core; a run on fewer threads cannot reach it (docs/profiling.md).
  if (capabilities(run_.device).kernels_on_host)
    log().info("MFU is against the peak of all {} cores; this run uses {} thread{}",
               kernels::cpu::hardware_peak().cores, threads_, threads_ == 1 ? "" : "s");
  if (step_ >= o.steps && !o.resume.empty())
    log().info("nothing to train: --resume {} is already at step {} = --steps", o.resume, step_);
  else if (o.steps == 0)
    log().info("--steps 0: nothing to train; the weights are saved as initialised");
  int64_t saved_step = -1;  // the step of the checkpoint written last by this loop
  // A stop signal (train/shutdown.h) ends the loop between steps, never inside one.
  while (step_ < o.steps && stop_signal() == 0) {
    const StepResult r = train_step();  // throws on a non-finite step under --on-nonfinite stop
    if (!r.skipped) last_loss = r.loss;
    tokens += static_cast<double>(o.batch * o.seq_len * o.grad_accum);
    train_ms += r.ms;
    const bool checkpoint_now = !o.checkpoint_dir.empty() && o.checkpoint_every > 0 &&
                                r.step % o.checkpoint_every == 0 && r.step < o.steps;
    if (checkpoint_now) gather_sharded_state(*optimizer_);
    if (!root) {
      drop_gathered_state(*optimizer_);
      continue;
    }
    std::optional<double> v;
    if (val_loader_ && (r.step == o.steps || (o.eval_every > 0 && r.step % o.eval_every == 0)))
      val_loss = v = evaluate(o.eval_batches);
    if (v) profiler_->add_val_loss(r.step, *v);
    log_.step(r, {.val_loss = v,
                  .mfu = mfu_ ? &*mfu_ : nullptr,
                  .world = comm_->size(),
                  .memory = Allocator::for_device(run_.device).stats(),
                  .planned_peak_bytes = preflight_ ? preflight_->planned_peak_bytes : -1});
    if (checkpoint_now) {
      log().info("checkpoint {}", timed_checkpoint());
      drop_gathered_state(*optimizer_);
      saved_step = step_;
    }
  }
  if (!o.checkpoint_dir.empty() || !o.save.empty()) gather_sharded_state(*optimizer_);
  if (!root) {
    drop_gathered_state(*optimizer_);
    return;
  }
  // A signal that came during the last step stops nothing: the run is complete.
  if (const int sig = stop_signal(); sig != 0 && step_ < o.steps) {
    stopped_by_signal_ = sig;
    std::string path;
    if (!o.checkpoint_dir.empty())
      path = saved_step == step_ ? o.checkpoint_dir + "/" + latest_checkpoint_name(o.checkpoint_dir)
                                 : save_checkpoint_now();
    log_.stopped(sig, step_, path, o.checkpoint_dir);
    drop_gathered_state(*optimizer_);
    return;
  }
  if (!o.checkpoint_dir.empty()) log().info("checkpoint {}", timed_checkpoint());
  if (profiler_->enabled()) {
    profiler_->set_ledger_state(ledger_state());
    std::vector<std::string> notes{config_.str()};
    if (comm_->size() > 1)
      notes.push_back(fmt::format(
          "Data parallel over {} ranks: the timeline, tape and memory ledger are rank 0's, and so "
          "are the gradient norms: of rank 0's loss on its own {} rows of the batch, before any "
          "all-reduce (each rank's differ with its rows).",
          comm_->size(), run_.options.batch / comm_->size()));
    profiler_->finish(fmt::format("glass train_gpt on {}", run_.device.str()), notes, run_facts());
  }
  if (!o.save.empty()) {
    // The tokenizer goes with the weights, so that samples/generate can decode their tokens.
    std::map<std::string, std::string> metadata;
    if (data_.tokenizer) metadata["tokenizer"] = data_.tokenizer->name();
    if (data_.vocab) metadata["char_vocab"] = char_vocab_metadata(*data_.vocab);
    save_gpt_weights(o.save, run_.save_format, *model_, DType::f32, metadata);
    // llama2.c's checkpoint has no metadata: run.c reads the vocabulary from tokenizer.bin beside
    // it, one piece per class of the model.
    if (run_.save_format == WeightLayout::llama2c && data_.tokenizer)
      save_llama2c_tokenizer(llama2c_tokenizer_path(o.save),
                             token_pieces(*data_.tokenizer, config_.vocab_size));
    log().info("saved weights to {} ({} layout)", o.save, o.save_format);
  }
  drop_gathered_state(*optimizer_);
  // The pre-flight's planned peak beside the peak measured after step 2 (same figure: allocated).
  const bool compare_peaks = preflight_ && measured_peak_ >= 0;
  log_.summary({.steps = step_ - first,
                .seconds = ms_since(t0) / 1000.0,
                .tokens_per_s = train_ms > 0 ? tokens / (train_ms / 1000.0) : 0.0,
                .final_loss = last_loss,
                .val_loss = val_loss,
                .memory = Allocator::for_device(run_.device).stats(),
                .planned_peak_bytes =
                    compare_peaks ? std::optional(preflight_->planned_peak_bytes) : std::nullopt,
                .measured_peak_bytes = compare_peaks ? std::optional(measured_peak_) : std::nullopt,
                .measured_step = std::min<int64_t>(step_ - first, 2),
                .skipped_steps = skipped_steps_,
                .mfu = mfu_ ? &*mfu_ : nullptr,
                .world = comm_->size()});
  if (o.sample > 0) {
    if (data_.tokenizer == nullptr) {
      log().warn("no sample: no tokenizer for the tokens of {} (vocabulary {})", data_.path,
                 data_.vocab_size);
      return;
    }
    const Sample s = sample(o.sample, o.seed);
    log_.sample(s.generation, data_.tokenizer->name(), o.prompt, s.text);
  }
}

}  // namespace glass::train
