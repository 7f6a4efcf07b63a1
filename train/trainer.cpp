#include "train/trainer.h"

#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>

#include "autograd/ops.h"
#include "autograd/tape_record.h"
#include "comm/zero_adamw.h"
#include "engine/allocator.h"
#include "engine/atomic_file.h"
#include "engine/debug.h"
#include "engine/launch.h"
#include "engine/log.h"
#include "kernels/backend.h"
#include "kernels/cpu/hardware_peak.h"
#include "kernels/cpu/threads.h"
#include "kernels/peaks.h"
#include "nn/gpt_weights.h"
#include "nn/llama2c_tokenizer.h"
#include "optim/step_status.h"
#include "train/checkpoint.h"
#include "train/distributed.h"
#include "train/gpt_cost.h"
#include "train/graph_step.h"
#include "train/micro_batches.h"
#include "train/shutdown.h"
#include "train/step_body.h"

namespace glass::train {

namespace {

Device pick_device(const std::string& name) {
  // "auto": cuda when this build has it and a GPU is present, else cpu (emu runs the CUDA kernels
  // on the CPU, slower; it is for seeing and debugging them). Under mpirun, "cuda" and "auto"
  // mean this rank's GPU on its host; "cuda:N" is taken as given.
  const Device d = name == "auto" ? Device::best_available() : Device::parse(name);
  return comm::device_for_this_rank(d, name.rfind("cuda:", 0) == 0);
}

// --dtype: "" is the device's default (bf16 on cuda, f32 elsewhere); every device has bf16 mixed
// precision (on cpu: kernels/cpu/element.h).
DType pick_dtype(const std::string& name, Device device) {
  if (name.empty()) return device.kind == DeviceKind::cuda ? DType::bf16 : DType::f32;
  GLASS_CHECK(name == "f32" || name == "bf16", "--dtype {}: expected f32 or bf16", name);
  return name == "f32" ? DType::f32 : DType::bf16;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The value a model-configuration flag sets in `c`.
double config_field(const GPTConfig& c, std::string_view flag) {
  if (flag == "--n-layer") return static_cast<double>(c.n_layer);
  if (flag == "--n-head") return static_cast<double>(c.n_head);
  if (flag == "--n-embd") return static_cast<double>(c.n_embd);
  if (flag == "--vocab-size") return static_cast<double>(c.vocab_size);
  if (flag == "--dropout") return c.dropout;
  if (flag == "--arch") return static_cast<double>(c.arch);
  if (flag == "--n-kv-head") return static_cast<double>(c.n_kv_head ? c.n_kv_head : c.n_head);
  if (flag == "--ffn-hidden") return c.arch == Arch::llama ? static_cast<double>(c.ffn()) : 0;
  if (flag == "--rope-theta") return c.rope_theta;
  if (flag == "--norm-eps") return c.norm_eps;
  if (flag == "--tie-embeddings") return c.tie_embeddings ? 1 : 0;
  fail("{} is not a flag of the model's configuration", flag);
}

// The model configuration the flags describe, with `vocab` classes.
GPTConfig config_from_flags(const TrainOptions& o, int64_t vocab) {
  GPTConfig c{.vocab_size = vocab,
              .block_size = o.seq_len,
              .n_layer = o.n_layer,
              .n_head = o.n_head,
              .n_embd = o.n_embd,
              .dropout = o.dropout,
              .arch = parse_arch(o.arch)};
  if (c.arch == Arch::llama) {
    c.n_kv_head = o.n_kv_head;
    c.ffn_hidden = o.ffn_hidden;
    c.rope_theta = o.rope_theta;
    c.norm_eps = o.norm_eps;
    c.tie_embeddings = o.tie_embeddings == "on";
  }
  return c;
}

// The flags that describe a model's shape (train_gpt records which of them were given).
const std::initializer_list<std::string_view>& shape_flags() {
  static const std::initializer_list<std::string_view> flags = {
      "--n-layer",    "--n-head",     "--n-embd",   "--arch",          "--n-kv-head",
      "--ffn-hidden", "--rope-theta", "--norm-eps", "--tie-embeddings"};
  return flags;
}

// Each of `flags` that was given on the command line must agree with the configuration a file
// holds: `holds` says which file and what it holds, `file_word` what to call it in the error.
// Flags left at their defaults yield to the file.
void check_flags_agree(const GPTConfig& file, const TrainOptions& opt,
                       std::initializer_list<std::string_view> flags, const std::string& holds,
                       std::string_view file_word) {
  const GPTConfig given = config_from_flags(opt, opt.vocab_size);
  for (const std::string& flag : opt.shape_flags_given) {
    if (std::find(flags.begin(), flags.end(), flag) == flags.end()) continue;
    const double have = config_field(file, flag), want = config_field(given, flag);
    // A file may leave a shape field 0: Hugging Face's and nanoGPT's do not say n_head.
    const bool unknown = have == 0 && flag != "--dropout" && flag != "--arch";
    GLASS_CHECK(unknown || have == want, "{}, but {} is {} ({}: {})", holds, flag, want, file_word,
                have);
  }
}

// The model's shape for --init's weights: the file's, checked against the flags that fix a shape
// (--model gpt2, or --n-layer/--n-head/--n-embd when given). With --model gpt2, wte grows to the
// preset's padded rows (a Hugging Face file has 50257). `w.state` is adjusted in place.
GPTConfig config_for_init(GPTWeights& w, const TrainOptions& opt) {
  GPTConfig c = w.config;
  const std::string holds = fmt::format("--init {} ({} layout) holds a model with {}", w.path,
                                        weight_layout_name(w.layout), c.str());
  if (!opt.model.empty()) {
    const GPTConfig preset = GPTConfig::preset(opt.model);
    GLASS_CHECK(c.arch == preset.arch, "{}, but --model {} is a {}", holds, opt.model,
                arch_name(preset.arch));
    const std::string diff = shape_differences(c, preset);
    GLASS_CHECK(diff.empty(), "{}, but --model {} is {}: {} (file vs flags)", holds, opt.model,
                preset.str(), diff);
    GLASS_CHECK(c.table_rows() <= std::max(preset.table_rows(), c.vocab_size),
                "{}, but --model {} has {} rows of wte (padded vocabulary), not {}", holds,
                opt.model, preset.table_rows(), c.table_rows());
    if (preset.padded_vocab_size) {
      w.state = pad_vocab_rows(w.state, preset.table_rows());
      c.padded_vocab_size = preset.padded_vocab_size;
    }
    if (c.block_size == 0) c.block_size = preset.block_size;
  } else {
    check_flags_agree(c, opt, shape_flags(), holds, "file");
    // Hugging Face's and nanoGPT's files do not say how many heads: --n-head does.
    if (c.n_head == 0) c.n_head = opt.n_head;
    // A llama's shapes do not say its block size (it has no position table): --seq-len does.
    if (c.block_size == 0) c.block_size = opt.seq_len;
    // With n_head known, a llama's qkv rows say its n_kv_head (checked against --n-kv-head).
    if (c.arch == Arch::llama && w.config.n_head == 0) {
      c = config_of_weights(w.state, c, w.path);
      check_flags_agree(c, opt, {"--n-kv-head"}, holds, "file");
    }
  }
  c.dropout = opt.dropout;
  return c;
}

bool flag_given(const TrainOptions& opt, std::string_view flag) {
  return std::find(opt.shape_flags_given.begin(), opt.shape_flags_given.end(), flag) !=
         opt.shape_flags_given.end();
}

// --resume continues the checkpoint's run: its model configuration and sequence length. A flag
// given on the command line that says otherwise is an error (worded as --init's), not ignored.
GPTConfig config_for_resume(const LoadedCheckpoint& ck, const TrainOptions& opt) {
  const GPTConfig& c = ck.state.config;
  const std::string holds = fmt::format("--resume {} holds a model with {}", ck.path, c.str());
  if (!opt.model.empty()) {
    const GPTConfig preset = GPTConfig::preset(opt.model);
    const std::string diff = shape_differences(c, preset);
    GLASS_CHECK(diff.empty() && c.arch == preset.arch,
                "{}, but --model {} is {}: {} (checkpoint vs flags)", holds, opt.model,
                preset.str(), diff.empty() ? "another architecture" : diff);
  }
  check_flags_agree(c, opt, shape_flags(), holds, "checkpoint");
  check_flags_agree(c, opt, {"--vocab-size", "--dropout"}, holds, "checkpoint");
  // The sequence length is the run's, not the model's (an --init run may train shorter sequences
  // than its block size): older checkpoints did not record it, and trained at the block size
  // unless they came from --init.
  const int64_t trained = ck.state.seq_len > 0 ? ck.state.seq_len : c.block_size;
  GLASS_CHECK(!flag_given(opt, "--seq-len") || ck.state.seq_len == 0 || opt.seq_len == trained,
              "{}, but --seq-len is {} (checkpoint: {})", holds, opt.seq_len, trained);
  return c;
}

// A resumed run must read the tokens its checkpoint was trained on: for text, the same character
// vocabulary, or every id would mean another character (another file with the same characters is
// fine). Checkpoints older than the recorded vocabulary are not checked.
void check_resumed_data(const LoadedCheckpoint& ck, const Dataset& data) {
  if (!ck.state.char_vocab) return;
  const std::string trained_on =
      fmt::format("--resume {} was trained on {}", ck.path, ck.state.data_path);
  if (ck.state.char_vocab->empty()) {
    GLASS_CHECK(!data.vocab, "{} (tokens), but --data {} is text (a character vocabulary of {})",
                trained_on, data.path, data.vocab_size);
    return;
  }
  const CharVocab vocab = char_vocab_from_metadata(*ck.state.char_vocab);
  GLASS_CHECK(data.vocab, "{} (text, a character vocabulary of {}), but --data {} is tokens",
              trained_on, vocab.size(), data.path);
  GLASS_CHECK(
      data.vocab->chars() == vocab.chars(),
      "{} (a character vocabulary of {}), but --data {} has another one (of {} characters): "
      "the token ids would mean other characters",
      trained_on, vocab.size(), data.path, data.vocab->size());
}

// The flags whose values are wrong whatever the data, device and files: checked before anything
// is loaded. Each error names the flag and its value, never the internal field it ends up in.
void check_run_flags(const TrainOptions& o) {
  // 0 builds a trainer that trains nothing (tests inspect its model); train_gpt refuses it.
  GLASS_CHECK(o.steps >= 0, "--steps {} must be at least 1", o.steps);
  GLASS_CHECK(o.seq_len >= 1, "--seq-len {} must be at least 1", o.seq_len);
  GLASS_CHECK(o.batch >= 1, "--batch {} must be at least 1", o.batch);
  GLASS_CHECK(o.grad_accum >= 1, "--grad-accum must be at least 1, not {}", o.grad_accum);
  GLASS_CHECK(o.threads >= 0, "--threads {} must be 0 (all cores) or more", o.threads);
  GLASS_CHECK(o.eval_every >= 0, "--eval-every {} must be 0 (only at the end) or more",
              o.eval_every);
  GLASS_CHECK(o.eval_batches >= 1, "--eval-batches {} must be at least 1", o.eval_batches);
  GLASS_CHECK(o.on_nonfinite == "stop" || o.on_nonfinite == "skip",
              "--on-nonfinite '{}': expected stop or skip", o.on_nonfinite);
  GLASS_CHECK(o.keep_last >= 0, "--keep-last {} must be 0 (keep all) or more", o.keep_last);
  GLASS_CHECK(o.checkpoint_every >= 0, "--checkpoint-every {} must be 0 (only at the end) or more",
              o.checkpoint_every);
  GLASS_CHECK(o.checkpoint_every == 0 || !o.checkpoint_dir.empty(),
              "--checkpoint-every {} needs --checkpoint-dir: there is nowhere to write them",
              o.checkpoint_every);
  GLASS_CHECK(o.init.empty() || o.resume.empty(),
              "--init {} and --resume {}: give one (--resume continues a run with its own "
              "weights; --init starts a new run from weights)",
              o.init, o.resume);
  parse_weight_layout(o.save_format);
  GLASS_CHECK(o.zero == 0 || o.zero == 1,
              "--zero {}: expected 0 (every rank keeps all optimizer state) or 1 (ZeRO-1: each "
              "rank keeps 1/N of it)",
              o.zero);
  GLASS_CHECK(o.zero == 0 || !o.cuda_graph,
              "--cuda-graph with --zero 1 is not supported: the sharded step waits on the host "
              "for the gradient norm's all-reduce and the parameters' all-gather, which a CUDA "
              "graph cannot capture; drop one of the two flags");
  // The sampling after training: its options fail now, not after the training.
  GLASS_CHECK(o.sample >= 0, "--sample {} must be 0 (no sample) or more", o.sample);
  check_sampling_options({o.temperature, o.top_k, o.seed});
}

AdamWOptions adamw_options(const TrainOptions& o) {
  return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay};
}

// --zero 1: a checkpoint needs the sharded moments whole. Every rank gathers them where rank 0
// saves, and drops the copy once saved (or at once, on the other ranks).
void gather_sharded_state(AdamW& optimizer) {
  if (auto* zero = dynamic_cast<comm::ZeroAdamW*>(&optimizer)) zero->gather_state();
}
void drop_gathered_state(AdamW& optimizer) {
  if (auto* zero = dynamic_cast<comm::ZeroAdamW*>(&optimizer)) zero->drop_gathered_state();
}

}  // namespace

// Construction in the order the pieces depend on each other; each step is a method below.
Trainer::Trainer(const TrainOptions& options) : opt_(options) {
  check_run_flags(opt_);  // a bad value fails now, not after training
  device_ = pick_device(opt_.device);
  GLASS_CHECK(has_data(device_),
              "--device {}: meta holds no data (shapes and launches only), so nothing can be "
              "trained on it; plan a step with `roofline step` (samples/roofline) instead",
              device_.str());
  // The kernel ladders are emu's and cuda's: on cpu a (valid) selection would change nothing, and
  // a learner comparing rungs by step time should hear so rather than see equal times.
  if (device_.kind == DeviceKind::cpu && std::getenv("GLASS_KERNEL_VARIANT") != nullptr)
    log().warn(
        "GLASS_KERNEL_VARIANT selects rungs of the emu and cuda kernels; cpu runs its own "
        "kernels, so it changes nothing here");
  // Before any device work: the graph's stream is current from here on (train/graph_step.h).
  // The captured dropout draws from dropout_gen_ (set in build_model; its address is fixed).
  if (opt_.cuda_graph) graph_ = std::make_unique<GraphStep>(device_, &dropout_gen_);
  // Refused on cpu, which has no TF32 GEMM: a flag that would change nothing there is a mistake.
  GLASS_CHECK(!opt_.tf32 || runs_cuda_kernels(device_),
              "--tf32 needs the TF32 GEMMs of the emu or cuda device; the cpu kernels are f32 (use "
              "--device emu, or drop --tf32)");
  kernels::set_tf32(opt_.tf32);
  dtype_ = pick_dtype(opt_.dtype, device_);
  threads_ = kernels::cpu::set_threads(opt_.threads);
  apply_model_preset();
  data_ = load_dataset(opt_.data, opt_.vocab_size);
  std::optional<LoadedCheckpoint> ck;
  std::optional<GPTWeights> init;
  choose_config(ck, init);
  if (!opt_.save.empty()) check_layout_holds(parse_weight_layout(opt_.save_format), config_.arch);
  check_prompt();
  // The ranks are known before the model is built: the pre-flight plans one rank's step.
  comm_ = comm::make_communicator(device_, {opt_.comm_timeout_s, opt_.comm_backend});
  if (opt_.preflight) preflight();  // before anything big is allocated
  const AttentionKernel attention = build_model(init);
  build_optimizer_and_loaders();
  if (ck) restore(*ck);
  first_step_ = step_;  // --cuda-graph: this run's first step is its eager warm-up
  profiler_ = std::make_unique<TrainProfiler>(
      ProfileOptions{opt_.trace, opt_.report, opt_.profile_steps}, step_ + 1, opt_.steps, device_);
  join_data_parallel(ck);
  // Mixed precision: bf16 compute copies of the (now final) master weights.
  if (dtype_ != DType::f32) model_->set_compute_dtype(dtype_);
  if (comm_->rank() == 0) {  // rank 0 writes the files for all ranks
    if (!opt_.metrics.empty()) {
      metrics_.open(opt_.metrics, std::ios::app);
      GLASS_CHECK(metrics_.good(), "cannot open metrics file '{}' for writing", opt_.metrics);
    }
    check_output_file("--save", opt_.save);
    check_output_file("--trace", opt_.trace);
    check_output_file("--report", opt_.report);
  }
  log_setup(attention);
}

// A preset fixes the architecture, and --model gpt2 the vocabulary (the GPT-2 tokenizer's).
void Trainer::apply_model_preset() {
  if (opt_.model.empty() && parse_arch(opt_.arch) == Arch::gpt2)
    for (const char* flag :
         {"--n-kv-head", "--ffn-hidden", "--rope-theta", "--norm-eps", "--tie-embeddings"})
      GLASS_CHECK(!flag_given(opt_, flag), "{} is a llama flag: add --arch llama", flag);
  if (opt_.model.empty()) return;
  const GPTConfig preset = GPTConfig::preset(opt_.model);
  GLASS_CHECK(!flag_given(opt_, "--arch") || parse_arch(opt_.arch) == preset.arch,
              "--model {} is a {}, but --arch is {}", opt_.model, arch_name(preset.arch),
              opt_.arch);
  opt_.arch = arch_name(preset.arch);
  const int64_t V = preset.vocab_size;
  if (V == 0) return;  // the data's vocabulary
  GLASS_CHECK(opt_.vocab_size == 0 || opt_.vocab_size == V,
              "--model {} has a vocabulary of {} tokens, but --vocab-size is {}", opt_.model, V,
              opt_.vocab_size);
  opt_.vocab_size = V;
}

// The model's shape: from the checkpoint when resuming, from --init's weights, else the preset or
// the flags; checked against the data.
void Trainer::choose_config(std::optional<LoadedCheckpoint>& ck, std::optional<GPTWeights>& init) {
  if (!opt_.resume.empty())
    ck = load_checkpoint(opt_.resume);
  else if (!opt_.init.empty())
    init = load_gpt_weights(opt_.init);
  // A llama's character vocabulary starts with llama2.c's special tokens (train/data.h).
  reserve_special_tokens(data_, ck     ? ck->state.config.arch
                                : init ? init->config.arch
                                       : parse_arch(opt_.arch));
  if (ck) {
    config_ = config_for_resume(*ck, opt_);
    // The run's sequence length, as the model's configuration is the checkpoint's (older
    // checkpoints did not record it: they trained at the block size unless they came from --init).
    if (!flag_given(opt_, "--seq-len"))
      opt_.seq_len = ck->state.seq_len > 0 ? ck->state.seq_len : config_.block_size;
    check_resumed_data(*ck, data_);
    // A resumed run continues to --steps, which counts the checkpoint's steps. At --steps it has
    // nothing left to train (run() says so): the same command run again after a crash at the end.
    GLASS_CHECK(opt_.steps >= ck->state.step,
                "--steps {}: --resume {} is already at step {}; --steps counts every step of the "
                "run, the checkpoint's included",
                opt_.steps, ck->path, ck->state.step);
  } else if (init) {
    config_ = config_for_init(*init, opt_);
  } else if (opt_.model == "gpt2") {
    GLASS_CHECK(!data_.vocab.has_value(),
                "--model gpt2 trains on llm.c token shards of GPT-2 tokens; {} is a text file "
                "(a character vocabulary of {})",
                data_.path, data_.vocab_size);
    config_ = GPTConfig::gpt2();
    config_.dropout = opt_.dropout;
  } else if (!opt_.model.empty()) {
    config_ = GPTConfig::preset(opt_.model);
    config_.vocab_size = data_.vocab_size;
    config_.dropout = opt_.dropout;
  } else {
    config_ = config_from_flags(opt_, data_.vocab_size);
  }
  config_.validate();
  GLASS_CHECK(config_.vocab_size >= data_.vocab_size,
              "the model's vocabulary ({}) is smaller than the data's ({})", config_.vocab_size,
              data_.vocab_size);
  GLASS_CHECK(opt_.seq_len <= config_.block_size,
              "--seq-len {} is longer than the model's block size {}", opt_.seq_len,
              config_.block_size);
}

// The model, initialised from --seed (or --init's weights), on the device, with its attention
// kernel; returns the kernel asked for.
AttentionKernel Trainer::build_model(const std::optional<GPTWeights>& init) {
  dropout_gen_ = Generator(opt_.seed ^ 0x9E3779B97F4A7C15ull);
  model_ = make_model(config_, dropout_gen_);
  Generator init_gen(opt_.seed);
  model_->init(init_gen);  // on cpu: Philox gives every device the same numbers anyway
  model_->to(device_);
  if (init) model_->load_state_dict(init->state);
  const AttentionKernel attention = parse_attention_kernel(opt_.attention);
  check_attention_kernel(resolve_attention_kernel(attention, device_, dtype_, config_.head_dim()),
                         device_, dtype_, config_.head_dim());
  model_->set_attention(attention);
  model_->set_recompute(parse_recompute(opt_.recompute));
  return attention;
}

void Trainer::build_optimizer_and_loaders() {
  // --zero 1: join_data_parallel builds it, over the shards of the gradient buckets.
  if (opt_.zero == 0)
    optimizer_ = std::make_unique<AdamW>(model_->named_parameters(), adamw_options(opt_));
  // A run shorter than the warmup warms up over the whole run.
  schedule_ =
      LrSchedule::parse(opt_.lr_schedule, opt_.lr, std::min(opt_.warmup, opt_.steps), opt_.steps);
  loader_ = std::make_unique<BatchLoader>(&data_.train, opt_.batch, opt_.seq_len, opt_.shuffle,
                                          opt_.seed);
  if (static_cast<int64_t>(data_.val.size()) > opt_.seq_len)
    val_loader_ = std::make_unique<BatchLoader>(&data_.val, opt_.batch, opt_.seq_len, false, 0);
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
  check_same_run(*comm_, opt_, config_);
  rows_of_rank(opt_.batch, comm_->rank(), comm_->size());  // fails now when N does not divide B
  GLASS_CHECK(opt_.grad_accum >= 1, "--grad-accum must be at least 1, not {}", opt_.grad_accum);
  if (std::string(comm_->backend()) != "local") {
    ddp_ = std::make_unique<comm::DataParallel>(*comm_, model_->named_parameters(),
                                                opt_.comm_bucket_mb, opt_.zero == 1);
    ddp_->broadcast_parameters();
    if (comm_->rank() != 0) log().set_level(spdlog::level::warn);  // rank 0 speaks for all
    log().info("data parallel: {} ranks ({} backend), gradient buckets: {}{}", comm_->size(),
               comm_->backend(), ddp_->buckets().size(),
               opt_.zero == 1 ? ", ZeRO-1: optimizer state sharded" : "");
  }
  if (optimizer_) return;
  // --zero 1: AdamW over this rank's shard; in a world of one there is nothing to shard.
  if (ddp_)
    optimizer_ =
        std::make_unique<comm::ZeroAdamW>(model_->named_parameters(), adamw_options(opt_), *ddp_);
  else
    optimizer_ = std::make_unique<AdamW>(model_->named_parameters(), adamw_options(opt_));
  if (ck) optimizer_->load_state(ck->optimizer, ck->optimizer_scalars);
  if (const auto* zero = dynamic_cast<const comm::ZeroAdamW*>(optimizer_.get()))
    log().info("ZeRO-1: AdamW moments {:.2f} MiB on each rank ({} of {} parameters' elements)",
               8.0 * static_cast<double>(zero->shard_numel()) / (1 << 20), zero->shard_numel(),
               model_->num_parameters());
}

// The step this rank will run, planned on meta against the device's free memory.
void Trainer::preflight() {
  PreflightRun run;
  run.device = device_;
  run.world = comm_->size();
  run.zero = opt_.zero;
  const RowRange rows = rows_of_rank(opt_.batch, comm_->rank(), comm_->size());
  StepPlanOptions& p = run.plan;
  p.config = config_;
  p.batch = rows.end - rows.begin;
  p.seq_len = opt_.seq_len;
  p.grad_accum = opt_.grad_accum;
  p.recompute = opt_.recompute;
  p.dtype = dtype_;
  // The kernel is checked for the run's device first (its error, not meta's). Meta plans the
  // emu and cuda kernels: a cpu run and cuDNN's attention (which keeps what flash attention keeps,
  // the LSE) are planned with meta's own choice.
  const int64_t head_dim = config_.head_dim();
  check_attention_kernel(
      resolve_attention_kernel(parse_attention_kernel(opt_.attention), device_, dtype_, head_dim),
      device_, dtype_, head_dim);
  p.attention = runs_cuda_kernels(device_) && opt_.attention != "cudnn" ? opt_.attention : "auto";
  p.tf32 = opt_.tf32;
  p.grad_clip = opt_.grad_clip;
  preflight_ = run_preflight(run);
}

void Trainer::log_setup(AttentionKernel attention) const {
  if (preflight_) log_preflight(*preflight_);
  log().info("device {} | {} threads | data {}: {} train + {} val tokens, vocab {}", device_.str(),
             threads_, data_.path, data_.train.size(), data_.val.size(), data_.vocab_size);
  log().info(
      "model {} | {:.2f}M parameters | {} | batch {} x {} = {} tokens per step | attention {}",
      config_.str(), static_cast<double>(model_->num_parameters()) / 1e6,
      dtype_ == DType::f32 ? "f32" : "bf16 mixed precision (f32 master weights)", opt_.batch,
      opt_.seq_len, opt_.batch * opt_.seq_len,
      attention_kernel_name(
          resolve_attention_kernel(attention, device_, dtype_, config_.n_embd / config_.n_head)));
}

StepResult Trainer::train_step() {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t syncs_before = host_sync_count();
  const uint64_t rng_offset_before = dropout_gen_.offset();
  profiler_->begin_step(step_ + 1);
  model_->train(true);
  // Each micro-step reads the next --batch rows of the stream, this rank its share of them; the
  // gradients of the micro-steps add up in .grad, each scaled by 1/k, and are all-reduced once.
  const RowRange rows = rows_of_rank(opt_.batch, comm_->rank(), comm_->size());
  StepResult r;
  r.lr = schedule_.at(step_);
  stage_test_nan();
  // The whole step is queued without the host waiting: forward, backward, the norm, the status
  // and the gated AdamW (--cuda-graph: as one graph replay after the eager warm-up step).
  const Tensor status = graph_ && step_ > first_step_
                            ? graph_step(rows, r.lr)
                            : finish_step_on_device(forward_backward(rows), r.lr);
  // A replayed data-parallel step: the host's wait for it, bounded by --comm-timeout, so that a
  // rank that died or hangs in the captured all-reduce ends the job with an error naming this rank
  // (eagerly the gradient sync bounds it). Then the read below finds the step done.
  if (graph_ && ddp_ && graph_->captured())
    comm_->wait_for_current_stream(fmt::format(
        "step {}: the replayed CUDA graph (its captured gradient all-reduces)", step_ + 1));
  // The step's one host read, after the update was queued: loss, gradient norm and the gate.
  const StepStatus st = read_step_status(status);
  r.loss = mean_over_ranks(*comm_, st.loss / static_cast<double>(opt_.grad_accum));
  r.grad_norm = st.grad_norm;
  // The norm is of the all-reduced gradients, the same on every rank; a rank's own loss is not,
  // so a loss that is finite here but not on another rank would let the replicas part.
  GLASS_CHECK(
      comm_->size() == 1 || st.finite == (std::isfinite(r.loss) && std::isfinite(r.grad_norm)),
      "step {}: the ranks disagree on whether the step is finite (this rank's loss {}, "
      "mean {}): the replicas would part",
      step_ + 1, st.loss, r.loss);
  if (!st.finite) {
    // The gate kept the weights and the moments as the step before left them; the step did not
    // count for AdamW's bias correction either.
    optimizer_->uncount_skipped_step();
    if (opt_.on_nonfinite == "stop") {
      const std::string origin = locate_nonfinite(rng_offset_before);
      fail("step {}: non-finite {} (loss {}, gradient norm {}); the weights were not updated. {}",
           step_ + 1, std::isfinite(r.loss) ? "gradients" : "loss", r.loss, r.grad_norm, origin);
    }
    r.skipped = true;
    skipped_steps_.push_back(step_ + 1);
  }
  return end_step(r, t0, syncs_before);
}

// Forward and backward of the step's micro-steps; returns the sum of their losses (on the device).
// All micro-steps' batches in two uploads (train/micro_batches.h: no staging wait mid-step).
Tensor Trainer::forward_backward(const RowRange& rows) {
  const MicroBatches batches = upload_micro_batches(host_micro_batches(rows), device_);
  return accumulate_micro_steps(
      [&](int64_t micro) { return batches.micro[static_cast<size_t>(micro)]; });
}

// This rank's rows of every micro-step of the current step, on the host.
std::vector<Batch> Trainer::host_micro_batches(const RowRange& rows) const {
  std::vector<Batch> batches;
  for (int64_t micro = 0; micro < opt_.grad_accum; ++micro)
    batches.push_back(loader_->rows(step_ * opt_.grad_accum + micro, rows.begin, rows.end, kCPU));
  return batches;
}

Tensor Trainer::accumulate_micro_steps(const std::function<Batch(int64_t micro)>& batch_of) {
  Tensor loss_sum;
  for (int64_t micro = 0; micro < opt_.grad_accum; ++micro) {
    const Tensor loss = micro_step(batch_of(micro), micro);
    loss_sum = micro == 0 ? loss : loss_sum + loss;
  }
  if (ddp_) ddp_->finish_gradient_sync();
  return loss_sum;
}

// One micro-step's forward and backward (its gradients scaled by 1/k into .grad); returns its
// loss, detached.
Tensor Trainer::micro_step(const Batch& b, int64_t micro) {
  const Tensor loss = batch_loss(*model_, b);
  // The recorded (profiled) step's tape, with the node ids its trace and report show; without
  // profiling, --print-tape prints the first step's.
  if (micro == 0 && profiler_->records_tape(step_ + 1)) profiler_->set_tape(record_tape(loss));
  if (opt_.print_tape && micro == 0 &&
      (profiler_->enabled() ? profiler_->records_tape(step_ + 1) : step_ == first_step_))
    fmt::print("tape of step {}:\n{}", step_ + 1, tape_string(loss, true));
  if (ddp_) ddp_->set_sync(micro + 1 == opt_.grad_accum);
  backward(opt_.grad_accum == 1 ? loss : loss / static_cast<double>(opt_.grad_accum));
  return loss.detach();
}

Tensor Trainer::finish_step_on_device(const Tensor& loss_sum, double lr) {
  inject_test_nan();
  return queue_step_update(*model_, *optimizer_, loss_sum, lr, opt_.grad_clip, step_ + 1);
}

// --cuda-graph after the eager warm-up step: capture (once) and replay.
Tensor Trainer::graph_step(const RowRange& rows, double lr) {
  // Every micro-step's batch, on the host: the graph uploads them before the replay and copies
  // them into its inputs (graph_step.h).
  const std::vector<Batch> batches = host_micro_batches(rows);
  // The step's scalars into the device memory the captured AdamW reads (before the capture, too:
  // an upload cannot be captured); a replay counts the optimizer's step on the host.
  optimizer_->set_lr(lr);
  optimizer_->stage_scalars(optimizer_->step_count() + 1, lr);
  if (graph_->captured()) optimizer_->count_replayed_step();
  // The captured step is the eager one's, all its micro-steps unrolled in one graph (with data
  // parallelism, the gradient all-reduces too: comm/data_parallel.h). Not one micro-step graph
  // replayed k times: the eager step's first micro-step sets each .grad (zero_grad left it
  // undefined) and the later ones add to it, so one captured micro-step could not be every
  // micro-step, and the loss sum's additions would need a graph of their own. Unrolled, the replay
  // queues exactly the eager step's kernels.
  return graph_->step(batches, [&](const std::vector<Batch>& in) {
    return finish_step_on_device(
        accumulate_micro_steps([&](int64_t micro) { return in[static_cast<size_t>(micro)]; }), lr);
  });
}

// Tests only (--test-inject-nan-step): one element of the first gradient gets a value added after
// backward, staged into device memory before each step: NaN at the chosen step, else 0. A kernel,
// so that a captured step injects it at the replay of that step too.
void Trainer::stage_test_nan() {
  if (opt_.test_inject_nan_step == 0) return;
  const float v = opt_.test_inject_nan_step == step_ + 1 ? NAN : 0.0f;
  if (!test_nan_.defined()) test_nan_ = Tensor::empty({1}, DType::f32, device_);
  test_nan_.copy_from_host(&v);
}

void Trainer::inject_test_nan() {
  if (opt_.test_inject_nan_step == 0) return;
  NoGradGuard no_grad;
  const Tensor g = model_->parameters().front().grad();
  GLASS_CHECK(g.dtype() == DType::f32 && g.is_contiguous(), "test NaN injection: gradient {}",
              g.describe());
  const Tensor one = slice(view(g, {-1}), 0, g.numel() / 2, g.numel() / 2 + 1);
  kernels::backend(g).binary(kernels::BinaryOp::add, one, test_nan_, one);
}

StepResult Trainer::end_step(StepResult& r, std::chrono::steady_clock::time_point t0,
                             uint64_t syncs_before) {
  ++step_;
  r.step = step_;
  // The measured peak beside the pre-flight's planned one: after the second step (the first of a
  // --cuda-graph run is its eager warm-up, and the second has run the step as the first left it).
  if (step_ - first_step_ <= 2)
    measured_peak_ = Allocator::for_device(device_).stats().peak_allocated_bytes;
  r.host_syncs = static_cast<int64_t>(host_sync_count() - syncs_before);
  r.ms = ms_since(t0);
  r.tokens_per_s =
      static_cast<double>(opt_.batch * opt_.seq_len * opt_.grad_accum) / (r.ms / 1000.0);
  profiler_->end_step({r.step, r.ms, r.tokens_per_s, r.host_syncs}, r.loss);
  return r;
}

Trainer::~Trainer() = default;

// What the step holds before it starts: the weights forward reads, the f32 masters behind bf16
// copies, and AdamW's moments (train/memory_ledger.h).
LedgerState Trainer::ledger_state() const {
  LedgerState s;
  const Allocator& allocator = Allocator::for_device(device_);
  auto bytes = [&allocator](const Tensor& t) {
    return static_cast<int64_t>(allocator.class_of(t.storage()->nbytes));
  };
  const std::vector<Tensor> copies = model_->compute_copies();
  for (const Tensor& p : model_->parameters()) {
    (copies.empty() ? s.parameters : s.master_weights) += bytes(p);
    s.storages.insert(p.storage().get());
  }
  for (const Tensor& c : copies) {
    s.parameters += bytes(c);
    s.storages.insert(c.storage().get());
  }
  for (const auto& [name, t] : optimizer_->state_tensors()) {
    if (!t.defined() || t.numel() == 0) continue;
    s.optimizer_moments += bytes(t);
    s.storages.insert(t.storage().get());
  }
  return s;
}

// The summary's numbers that do not come from the launches (train/report.h).
RunFacts Trainer::run_facts() const {
  RunFacts f;
  f.model = config_.str();
  f.device = device_.str();
  f.dtype = dtype_ == DType::f32 ? "f32" : "bf16 (f32 master weights)";
  f.tokens_per_step = static_cast<double>(opt_.batch * opt_.seq_len * opt_.grad_accum);
  const DevicePeaks peaks = kernels::peaks_for(device_);
  f.peak_dtype = peaks.bf16_flops > 0 ? dtype_ : DType::f32;
  if (mfu_) {
    f.model_flops_per_token = mfu_->flops_per_token;
    f.mfu_formula = mfu_->formula;
  }
  const AllocatorStats mem = Allocator::for_device(device_).stats();
  f.peak_allocated_bytes = mem.peak_allocated_bytes;
  f.peak_reserved_bytes = mem.peak_reserved_bytes;
  // The cost model's budget of this rank's step (train/gpt_cost.h), as this run runs it.
  const int64_t rows = opt_.batch / comm_->size();
  const bool gpu_kernels = runs_cuda_kernels(device_);
  const GptMemoryBudget budget = gpt_memory_budget(config_, opt_.batch, opt_.seq_len, dtype_,
                                                   {.flash_attention = opt_.attention != "naive",
                                                    .fused_classifier = gpu_kernels,
                                                    .gemm_workspace = gpu_kernels,
                                                    .recompute = parse_recompute(opt_.recompute),
                                                    .world = comm_->size(),
                                                    .zero = opt_.zero});
  f.predicted_peak_bytes = budget.total_bytes();
  constexpr double MiB = 1 << 20;
  f.predicted_source = fmt::format(
      "the cost model (train/gpt_cost.h) for batch {} x {}, at {}: parameters {:.1f} + gradients "
      "{:.1f} + masters {:.1f} + AdamW {:.1f} + activations {:.1f} + temporaries {:.1f} + "
      "recomputed {:.1f} + gradient buckets {:.1f} + GEMM workspace {:.1f} + size classes {:.1f} "
      "MiB{}",
      rows, opt_.seq_len, budget.peak_at, budget.parameters_bytes / MiB,
      budget.gradients_bytes / MiB, budget.master_bytes / MiB, budget.adam_bytes / MiB,
      budget.activations_bytes / MiB, budget.temporaries_bytes / MiB, budget.recompute_bytes / MiB,
      budget.gradient_buckets_bytes / MiB, budget.workspace_bytes / MiB,
      budget.size_class_bytes / MiB,
      preflight_ ? fmt::format("; the pre-flight planned {:.1f} MiB on meta",
                               static_cast<double>(preflight_->planned_peak_bytes) / MiB)
                 : std::string());
  return f;
}

std::string Trainer::locate_nonfinite(uint64_t rng_offset) {
  if (check_nan_enabled())
    return "Anomaly mode was on and no op produced it: it arose outside autograd (after backward).";
  if (ddp_)
    return "Run again with GLASS_CHECK_NAN=1 to name the first node that produced it (the "
           "re-run is not done under data parallelism).";
  // 1. Anomaly mode on, the dropout generator back where the step started, the same batches.
  const DebugSettings saved = debug_settings();
  DebugSettings anomaly = saved;
  anomaly.check_nan = true;
  set_debug_settings(anomaly);
  const uint64_t seed = dropout_gen_.seed(), offset_after = dropout_gen_.offset();
  dropout_gen_.set_state(seed, rng_offset);
  std::string origin =
      "A re-run of the step in anomaly mode (GLASS_CHECK_NAN) found no op that produced it: it "
      "arose outside autograd (after backward).";
  try {
    const RowRange rows = rows_of_rank(opt_.batch, comm_->rank(), comm_->size());
    for (int64_t micro = 0; micro < opt_.grad_accum; ++micro) {
      const Batch b = loader_->rows(step_ * opt_.grad_accum + micro, rows.begin, rows.end, device_);
      backward(batch_loss(*model_, b));
    }
  } catch (const Error& e) {
    // 2. The first check that fails names the node and where forward created it.
    origin = fmt::format("First produced by: {}", e.what());
  }
  set_debug_settings(saved);
  dropout_gen_.set_state(seed, offset_after);
  optimizer_->zero_grad();
  return origin;
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
    total += item(batch_loss(*model_, val_loader_->batch(i, device_)));
  model_->train(true);
  return total / static_cast<double>(batches);
}

// --prompt is encoded at start-up too, so that a character outside the vocabulary fails before
// the training rather than after it. Without a tokenizer run() samples nothing (and says so).
void Trainer::check_prompt() const {
  if (opt_.sample == 0 || opt_.prompt.empty() || data_.tokenizer == nullptr) return;
  try {
    sample_context(*data_.tokenizer, opt_.prompt);
  } catch (const Error& e) {
    fail("--prompt: {}", e.what());
  }
}

Trainer::Sample Trainer::sample(int64_t n, uint64_t seed, bool kv_cache) {
  GLASS_CHECK(
      data_.tokenizer != nullptr,
      "sampling: no tokenizer for the tokens of {} (vocabulary {}): GPT-2 tokens (50257) "
      "need GPT-2's vocabulary (scripts/setup.sh) or a gpt2_tokenizer.bin beside the shards",
      data_.path, data_.vocab_size);
  Sample s;
  s.generation = generate(*model_, sample_context(*data_.tokenizer, opt_.prompt), n,
                          {opt_.temperature, opt_.top_k, seed}, kv_cache);
  s.text = without_partial_utf8_tail(data_.tokenizer->decode(s.generation.tokens));
  return s;
}

std::string Trainer::save_checkpoint_now() const {
  CheckpointState s;
  s.step = step_;
  s.rng_seed = dropout_gen_.seed();
  s.rng_offset = dropout_gen_.offset();
  s.data_position = step_;
  s.config = config_;
  s.data_path = data_.path;
  s.seq_len = opt_.seq_len;
  s.char_vocab = data_.vocab ? char_vocab_metadata(*data_.vocab) : "";
  return save_checkpoint(opt_.checkpoint_dir, s, *model_, *optimizer_, opt_.keep_last);
}

void Trainer::log_step(const StepResult& r, std::optional<double> val_loss) {
  const AllocatorStats mem = Allocator::for_device(device_).stats();
  // MFU is per device: each of the N ranks processes 1/N of the step's tokens.
  const double mfu = mfu_ ? mfu_->of(r.tokens_per_s / static_cast<double>(comm_->size())) : 0.0;
  const double hfu = mfu_ ? mfu_->hfu_of(r.tokens_per_s / static_cast<double>(comm_->size())) : 0.0;
  if (!opt_.quiet || val_loss) {
    std::string line = fmt::format(
        "step {:5d}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:7.1f} ms | {:8.0f} tok/s",
        r.step, opt_.steps, r.loss, r.lr, r.grad_norm, r.ms, r.tokens_per_s);
    if (mfu_)
      line += fmt::format(" | MFU {:.2f}%{} | peak mem {:.1f}/{:.1f} MiB alloc/resv", 100 * mfu,
                          hfu != mfu ? fmt::format(" HFU {:.2f}%", 100 * hfu) : "",
                          static_cast<double>(mem.peak_allocated_bytes) / (1 << 20),
                          static_cast<double>(mem.peak_reserved_bytes) / (1 << 20));
    if (val_loss) line += fmt::format(" | val loss {:.4f}", *val_loss);
    if (r.skipped) line += " | skipped (non-finite)";
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }
  if (metrics_.is_open()) {
    nlohmann::json j = {{"step", r.step},
                        {"loss", r.loss},
                        {"lr", r.lr},
                        {"grad_norm", r.grad_norm},
                        {"ms", r.ms},
                        {"tokens_per_s", r.tokens_per_s},
                        {"mfu", mfu},
                        {"hfu", hfu},
                        {"peak_allocated_bytes", mem.peak_allocated_bytes},
                        {"peak_reserved_bytes", mem.peak_reserved_bytes},
                        // The pre-flight's plan of the same (peak allocated) figure; -1: none.
                        {"planned_peak_bytes", preflight_ ? preflight_->planned_peak_bytes : -1},
                        {"host_syncs", r.host_syncs},
                        {"skipped", r.skipped}};
    if (val_loss) j["val_loss"] = *val_loss;
    metrics_ << j.dump() << "\n";
    metrics_.flush();
  }
}

void Trainer::run() {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t first = step_;
  const bool root = comm_->rank() == 0;  // evaluates, logs, checkpoints and saves for all ranks
  double last_loss = NAN, tokens = 0, train_ms = 0;
  std::optional<double> val_loss;
  // MFU against the peak of the step's math: bf16 tensor cores where the device has such a peak;
  // cpu and emu have none (emu does bf16 GEMMs in f32 on the host), so their f32 peak.
  const DevicePeaks peaks = kernels::peaks_for(device_);
  mfu_ = with_recompute(
      gpt_mfu(config_, opt_.seq_len, peaks, peaks.bf16_flops > 0 ? dtype_ : DType::f32), config_,
      opt_.seq_len, parse_recompute(opt_.recompute), device_.kind != DeviceKind::cpu);
  log().info("{}", mfu_->formula);
  // The host's peak counts every core; a run on fewer threads cannot reach it (docs/profiling.md).
  if (device_.kind != DeviceKind::cuda)
    log().info("MFU is against the peak of all {} cores; this run uses {} thread{}",
               kernels::cpu::hardware_peak().cores, threads_, threads_ == 1 ? "" : "s");
  if (step_ >= opt_.steps && !opt_.resume.empty())
    log().info("nothing to train: --resume {} is already at step {} = --steps", opt_.resume, step_);
  else if (opt_.steps == 0)
    log().info("--steps 0: nothing to train; the weights are saved as initialised");
  int64_t saved_step = -1;  // the step of the checkpoint written last by this loop
  // A stop signal (train/shutdown.h) ends the loop between steps, never inside one.
  while (step_ < opt_.steps && stop_signal() == 0) {
    const StepResult r = train_step();  // throws on a non-finite step under --on-nonfinite stop
    if (!r.skipped) last_loss = r.loss;
    tokens += static_cast<double>(opt_.batch * opt_.seq_len * opt_.grad_accum);
    train_ms += r.ms;
    const bool checkpoint_now = !opt_.checkpoint_dir.empty() && opt_.checkpoint_every > 0 &&
                                r.step % opt_.checkpoint_every == 0 && r.step < opt_.steps;
    if (checkpoint_now) gather_sharded_state(*optimizer_);
    if (!root) {
      drop_gathered_state(*optimizer_);
      continue;
    }
    std::optional<double> v;
    if (val_loader_ &&
        (r.step == opt_.steps || (opt_.eval_every > 0 && r.step % opt_.eval_every == 0)))
      val_loss = v = evaluate(opt_.eval_batches);
    if (v) profiler_->add_val_loss(r.step, *v);
    log_step(r, v);
    if (checkpoint_now) {
      log().info("checkpoint {}", save_checkpoint_now());
      drop_gathered_state(*optimizer_);
      saved_step = step_;
    }
  }
  if (!opt_.checkpoint_dir.empty()) gather_sharded_state(*optimizer_);
  if (!root) {
    drop_gathered_state(*optimizer_);
    return;
  }
  // A signal that came during the last step stops nothing: the run is complete.
  if (const int sig = stop_signal(); sig != 0 && step_ < opt_.steps) {
    stopped_by_signal_ = sig;
    if (opt_.checkpoint_dir.empty()) {
      fmt::print("\nstopped by {} after step {}: no --checkpoint-dir, so nothing was saved\n",
                 stop_signal_name(sig), step_);
    } else {
      const std::string path = saved_step == step_ ? opt_.checkpoint_dir + "/" +
                                                         latest_checkpoint_name(opt_.checkpoint_dir)
                                                   : save_checkpoint_now();
      fmt::print(
          "\nstopped by {} after step {}: checkpoint written to {} (continue with --resume {})\n",
          stop_signal_name(sig), step_, path, opt_.checkpoint_dir);
    }
    std::fflush(stdout);
    return;
  }
  if (!opt_.checkpoint_dir.empty()) log().info("checkpoint {}", save_checkpoint_now());
  drop_gathered_state(*optimizer_);
  if (profiler_->enabled()) {
    profiler_->set_ledger_state(ledger_state());
    profiler_->finish(fmt::format("glass train_gpt on {}", device_.str()), {config_.str()},
                      run_facts());
  }
  if (!opt_.save.empty()) {
    // The tokenizer goes with the weights, so that samples/generate can decode their tokens.
    std::map<std::string, std::string> metadata;
    if (data_.tokenizer) metadata["tokenizer"] = data_.tokenizer->name();
    if (data_.vocab) metadata["char_vocab"] = char_vocab_metadata(*data_.vocab);
    const WeightLayout layout = parse_weight_layout(opt_.save_format);
    save_gpt_weights(opt_.save, layout, *model_, DType::f32, metadata);
    // llama2.c's checkpoint has no metadata: run.c reads the vocabulary from tokenizer.bin beside
    // it, one piece per class of the model.
    if (layout == WeightLayout::llama2c && data_.tokenizer)
      save_llama2c_tokenizer(llama2c_tokenizer_path(opt_.save),
                             token_pieces(*data_.tokenizer, config_.vocab_size));
    log().info("saved weights to {} ({} layout)", opt_.save, opt_.save_format);
  }
  const AllocatorStats mem = Allocator::for_device(device_).stats();
  // No step run (resumed at --steps): no loss to report, rather than "final loss nan".
  const std::string losses =
      step_ == first ? ""
                     : fmt::format(" | final loss {:.4f}{}", last_loss,
                                   val_loss ? fmt::format(" | val loss {:.4f}", *val_loss) : "");
  // The pre-flight's planned peak beside the peak measured after step 2 (same figure: allocated).
  const std::string planned =
      preflight_ && measured_peak_ >= 0
          ? fmt::format(" | planned peak {:.1f} MiB (pre-flight), measured {:.1f} MiB (step {})",
                        static_cast<double>(preflight_->planned_peak_bytes) / (1 << 20),
                        static_cast<double>(measured_peak_) / (1 << 20),
                        std::min<int64_t>(step_ - first, 2))
          : "";
  fmt::print(
      "\ndone: {} steps in {:.1f} s | {:.0f} tok/s{} | peak memory {:.1f} MiB allocated, {:.1f} "
      "MiB reserved{}\n",
      step_ - first, ms_since(t0) / 1000.0, train_ms > 0 ? tokens / (train_ms / 1000.0) : 0.0,
      losses, static_cast<double>(mem.peak_allocated_bytes) / (1 << 20),
      static_cast<double>(mem.peak_reserved_bytes) / (1 << 20), planned);
  if (!skipped_steps_.empty())
    fmt::print("skipped {} non-finite step(s) (--on-nonfinite skip): {}\n", skipped_steps_.size(),
               fmt::join(skipped_steps_, ", "));
  if (opt_.sample > 0) {
    if (data_.tokenizer == nullptr) {
      log().warn("no sample: no tokenizer for the tokens of {} (vocabulary {})", data_.path,
                 data_.vocab_size);
      return;
    }
    const Sample s = sample(opt_.sample, opt_.seed);
    fmt::print("\n--- sample: {} {} tokens, {:.1f} tokens/s (KV cache) ---\n{}{}\n---\n",
               s.generation.tokens.size(), data_.tokenizer->name(), s.generation.tokens_per_s(),
               opt_.prompt, s.text);
  }
}

}  // namespace glass::train
