#include "train/run_config.h"

#include <algorithm>
#include <iterator>
#include <span>

#include "comm/communicator.h"
#include "engine/device_runtime.h"
#include "engine/error.h"
#include "train/generate.h"

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
  if (name.empty()) return capabilities(device).bf16_by_default ? DType::bf16 : DType::f32;
  GLASS_CHECK(name == "f32" || name == "bf16", "--dtype {}: expected f32 or bf16", name);
  return name == "f32" ? DType::f32 : DType::bf16;
}

NonFinitePolicy parse_nonfinite_policy(const std::string& name) {
  for (NonFinitePolicy p : {NonFinitePolicy::stop, NonFinitePolicy::skip})
    if (name == nonfinite_policy_name(p)) return p;
  fail("--on-nonfinite '{}': expected stop or skip", name);
}

// The flags whose values are wrong whatever the data, device and files: checked before anything
// is loaded. Each error names the flag and its value, never the internal field it ends up in.
// The choices among them are parsed into `run` on the way.
void check_run_flags(RunConfig& run) {
  const TrainOptions& o = run.options;
  // 0 builds a trainer that trains nothing (tests inspect its model); train_gpt refuses it.
  GLASS_CHECK(o.steps >= 0, "--steps {} must be at least 1", o.steps);
  GLASS_CHECK(o.seq_len >= 1, "--seq-len {} must be at least 1", o.seq_len);
  GLASS_CHECK(o.batch >= 1, "--batch {} must be at least 1", o.batch);
  GLASS_CHECK(o.grad_accum >= 1, "--grad-accum must be at least 1, not {}", o.grad_accum);
  GLASS_CHECK(o.threads >= 0, "--threads {} must be 0 (all cores) or more", o.threads);
  GLASS_CHECK(o.eval_every >= 0, "--eval-every {} must be 0 (only at the end) or more",
              o.eval_every);
  GLASS_CHECK(o.eval_batches >= 1, "--eval-batches {} must be at least 1", o.eval_batches);
  run.on_nonfinite = parse_nonfinite_policy(o.on_nonfinite);
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
  run.save_format = parse_weight_layout(o.save_format);
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

// One model flag: its spelling, how the command line's value becomes RunConfig::given, whether it
// was given, and the value a configuration holds for it (as a number, as the errors print it).
// `zero_is_unknown`: a file may leave the field 0 (Hugging Face's and nanoGPT's do not say
// n_head), which then agrees with any value of the flag.
struct ModelFlag {
  const char* name;
  void (*take)(GivenModelFlags&, const TrainOptions&);
  bool (*given)(const GivenModelFlags&);
  double (*of)(const GPTConfig&);
  bool zero_is_unknown = true;
};

// kVar: --spelling sets GivenModelFlags::field to `given_value` (of TrainOptions o); a GPTConfig c
// holds `value` for it.
#define GLASS_MODEL_FLAG(var, spelling, field, given_value, value, ...)                          \
  constexpr ModelFlag var {                                                                      \
    spelling, [](GivenModelFlags& g, const TrainOptions& o) { g.field = given_value; },          \
        [](const GivenModelFlags& g) { return g.field.has_value(); },                            \
        [](const GPTConfig& c) { return static_cast<double>(value); } __VA_OPT__(, ) __VA_ARGS__ \
  }

GLASS_MODEL_FLAG(kNLayer, "--n-layer", n_layer, o.n_layer, c.n_layer);
GLASS_MODEL_FLAG(kNHead, "--n-head", n_head, o.n_head, c.n_head);
GLASS_MODEL_FLAG(kNEmbd, "--n-embd", n_embd, o.n_embd, c.n_embd);
GLASS_MODEL_FLAG(kSeqLen, "--seq-len", seq_len, o.seq_len, c.block_size);
GLASS_MODEL_FLAG(kVocabSize, "--vocab-size", vocab_size, o.vocab_size, c.vocab_size);
GLASS_MODEL_FLAG(kDropout, "--dropout", dropout, o.dropout, c.dropout, false);
GLASS_MODEL_FLAG(kArch, "--arch", arch, parse_arch(o.arch), c.arch, false);
GLASS_MODEL_FLAG(kNKvHead, "--n-kv-head", n_kv_head, o.n_kv_head,
                 c.n_kv_head ? c.n_kv_head : c.n_head);
GLASS_MODEL_FLAG(kFfnHidden, "--ffn-hidden", ffn_hidden, o.ffn_hidden,
                 c.arch == Arch::llama ? c.ffn() : 0);
GLASS_MODEL_FLAG(kRopeTheta, "--rope-theta", rope_theta, o.rope_theta, c.rope_theta);
GLASS_MODEL_FLAG(kNormEps, "--norm-eps", norm_eps, o.norm_eps, c.norm_eps);
GLASS_MODEL_FLAG(kTieEmbeddings, "--tie-embeddings", tie_embeddings, o.tie_embeddings == "on",
                 c.tie_embeddings ? 1 : 0);
#undef GLASS_MODEL_FLAG

constexpr ModelFlag kModelFlags[] = {kNLayer,    kNHead,     kNEmbd,   kSeqLen,
                                     kVocabSize, kDropout,   kArch,    kNKvHead,
                                     kFfnHidden, kRopeTheta, kNormEps, kTieEmbeddings};

// The model flags the command line set (TrainOptions::shape_flags_given: their spellings, read
// here and nowhere else), each with its value.
GivenModelFlags given_model_flags(const TrainOptions& o) {
  GivenModelFlags g;
  for (const std::string& spelling : o.shape_flags_given) {
    const ModelFlag* flag = std::find_if(std::begin(kModelFlags), std::end(kModelFlags),
                                         [&](const ModelFlag& f) { return spelling == f.name; });
    GLASS_CHECK(flag != std::end(kModelFlags), "{} is not a flag of the model's configuration",
                spelling);
    flag->take(g, o);
  }
  return g;
}

// The flags that describe a model's shape, those of them only a llama has, and those a checkpoint
// holds beyond the shape.
constexpr ModelFlag kShapeFlags[] = {kNLayer,    kNHead,     kNEmbd,   kArch,         kNKvHead,
                                     kFfnHidden, kRopeTheta, kNormEps, kTieEmbeddings};
constexpr ModelFlag kLlamaFlags[] = {kNKvHead, kFfnHidden, kRopeTheta, kNormEps, kTieEmbeddings};
constexpr ModelFlag kRunFlags[] = {kVocabSize, kDropout};
constexpr ModelFlag kKvHeadFlag[] = {kNKvHead};

// Each of `flags` that was given on the command line must agree with the configuration a file
// holds: `holds` says which file and what it holds, `file_word` what to call it in the error.
// Flags left at their defaults yield to the file.
void check_flags_agree(const GPTConfig& file, const RunConfig& run,
                       std::span<const ModelFlag> flags, const std::string& holds,
                       std::string_view file_word) {
  const GPTConfig given = config_from_flags(run, run.options.vocab_size);
  for (const ModelFlag& flag : flags) {
    if (!flag.given(run.given)) continue;
    const double have = flag.of(file), want = flag.of(given);
    const bool unknown = have == 0 && flag.zero_is_unknown;
    GLASS_CHECK(unknown || have == want, "{}, but {} is {} ({}: {})", holds, flag.name, want,
                file_word, have);
  }
}

// A preset fixes the architecture, and --model gpt2 the vocabulary (the GPT-2 tokenizer's).
void apply_model_preset(RunConfig& run) {
  TrainOptions& o = run.options;
  if (o.model.empty()) {
    run.arch = parse_arch(o.arch);
    if (run.arch == Arch::gpt2)
      for (const ModelFlag& flag : kLlamaFlags)
        GLASS_CHECK(!flag.given(run.given), "{} is a llama flag: add --arch llama", flag.name);
    return;
  }
  const GPTConfig preset = GPTConfig::preset(o.model);
  GLASS_CHECK(!run.given.arch || *run.given.arch == preset.arch,
              "--model {} is a {}, but --arch is {}", o.model, arch_name(preset.arch), o.arch);
  run.arch = preset.arch;
  o.arch = arch_name(preset.arch);
  const int64_t V = preset.vocab_size;
  if (V == 0) return;  // the data's vocabulary
  GLASS_CHECK(o.vocab_size == 0 || o.vocab_size == V,
              "--model {} has a vocabulary of {} tokens, but --vocab-size is {}", o.model, V,
              o.vocab_size);
  o.vocab_size = V;
}

// The model's shape for --init's weights: the file's, checked against the flags that fix a shape
// (--model gpt2, or --n-layer/--n-head/--n-embd when given). With --model gpt2, wte grows to the
// preset's padded rows (a Hugging Face file has 50257). `w.state` is adjusted in place.
GPTConfig config_for_init(GPTWeights& w, const RunConfig& run) {
  const TrainOptions& opt = run.options;
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
    check_flags_agree(c, run, kShapeFlags, holds, "file");
    // Hugging Face's and nanoGPT's files do not say how many heads: --n-head does.
    if (c.n_head == 0) c.n_head = opt.n_head;
    // A llama's shapes do not say its block size (it has no position table): --seq-len does.
    if (c.block_size == 0) c.block_size = opt.seq_len;
    // With n_head known, a llama's qkv rows say its n_kv_head (checked against --n-kv-head).
    if (c.arch == Arch::llama && w.config.n_head == 0) {
      c = config_of_weights(w.state, c, w.path);
      check_flags_agree(c, run, kKvHeadFlag, holds, "file");
    }
  }
  c.dropout = opt.dropout;
  return c;
}

// --resume continues the checkpoint's run: its model configuration and sequence length. A flag
// given on the command line that says otherwise is an error (worded as --init's), not ignored.
GPTConfig config_for_resume(const LoadedCheckpoint& ck, const RunConfig& run) {
  const TrainOptions& opt = run.options;
  const GPTConfig& c = ck.state.config;
  const std::string holds = fmt::format("--resume {} holds a model with {}", ck.path, c.str());
  if (!opt.model.empty()) {
    const GPTConfig preset = GPTConfig::preset(opt.model);
    const std::string diff = shape_differences(c, preset);
    GLASS_CHECK(diff.empty() && c.arch == preset.arch,
                "{}, but --model {} is {}: {} (checkpoint vs flags)", holds, opt.model,
                preset.str(), diff.empty() ? "another architecture" : diff);
  }
  check_flags_agree(c, run, kShapeFlags, holds, "checkpoint");
  check_flags_agree(c, run, kRunFlags, holds, "checkpoint");
  // The sequence length is the run's, not the model's (an --init run may train shorter sequences
  // than its block size): older checkpoints did not record it, and trained at the block size
  // unless they came from --init.
  const int64_t trained = ck.state.seq_len > 0 ? ck.state.seq_len : c.block_size;
  GLASS_CHECK(!run.given.seq_len || ck.state.seq_len == 0 || opt.seq_len == trained,
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

}  // namespace

const char* nonfinite_policy_name(NonFinitePolicy p) {
  return p == NonFinitePolicy::stop ? "stop" : "skip";
}

RunConfig resolve(const TrainOptions& options) {
  RunConfig run;
  run.options = options;
  const TrainOptions& o = run.options;
  check_run_flags(run);  // a bad value fails now, not after training
  run.device = pick_device(o.device);
  GLASS_CHECK(has_data(run.device),
              "--device {}: meta holds no data (shapes and launches only), so nothing can be "
              "trained on it; plan a step with `roofline step` (samples/roofline) instead",
              run.device.str());
  // Refused on cpu, which has no TF32 GEMM: a flag that would change nothing there is a mistake.
  GLASS_CHECK(!o.tf32 || capabilities(run.device).tf32,
              "--tf32 needs the TF32 GEMMs of the emu or cuda device; the cpu kernels are f32 (use "
              "--device emu, or drop --tf32)");
  run.dtype = pick_dtype(o.dtype, run.device);
  run.given = given_model_flags(o);
  apply_model_preset(run);
  run.tie_embeddings = o.tie_embeddings == "on";
  run.attention = parse_attention_kernel(o.attention);
  run.recompute = parse_recompute(o.recompute);
  return run;
}

GPTConfig config_from_flags(const RunConfig& run, int64_t vocab) {
  const TrainOptions& o = run.options;
  GPTConfig c{.vocab_size = vocab,
              .block_size = o.seq_len,
              .n_layer = o.n_layer,
              .n_head = o.n_head,
              .n_embd = o.n_embd,
              .dropout = o.dropout,
              .arch = run.arch};
  if (c.arch == Arch::llama) {
    c.n_kv_head = o.n_kv_head;
    c.ffn_hidden = o.ffn_hidden;
    c.rope_theta = o.rope_theta;
    c.norm_eps = o.norm_eps;
    c.tie_embeddings = run.tie_embeddings;
  }
  return c;
}

GPTConfig resolve_model(RunConfig& run, Dataset& data, const LoadedCheckpoint* ck,
                        GPTWeights* init) {
  TrainOptions& o = run.options;
  // A llama's character vocabulary starts with llama2.c's special tokens (train/data.h).
  reserve_special_tokens(data, ck ? ck->state.config.arch : init ? init->config.arch : run.arch);
  GPTConfig config;
  if (ck) {
    config = config_for_resume(*ck, run);
    // The run's sequence length, as the model's configuration is the checkpoint's (older
    // checkpoints did not record it: they trained at the block size unless they came from --init).
    if (!run.given.seq_len)
      o.seq_len = ck->state.seq_len > 0 ? ck->state.seq_len : config.block_size;
    check_resumed_data(*ck, data);
    // A resumed run continues to --steps, which counts the checkpoint's steps. At --steps it has
    // nothing left to train (Trainer::run says so): the same command run again after a crash at
    // the end.
    GLASS_CHECK(o.steps >= ck->state.step,
                "--steps {}: --resume {} is already at step {}; --steps counts every step of the "
                "run, the checkpoint's included",
                o.steps, ck->path, ck->state.step);
  } else if (init) {
    config = config_for_init(*init, run);
  } else if (o.model == "gpt2") {
    GLASS_CHECK(!data.vocab.has_value(),
                "--model gpt2 trains on llm.c token shards of GPT-2 tokens; {} is a text file "
                "(a character vocabulary of {})",
                data.path, data.vocab_size);
    config = GPTConfig::gpt2();
    config.dropout = o.dropout;
  } else if (!o.model.empty()) {
    config = GPTConfig::preset(o.model);
    config.vocab_size = data.vocab_size;
    config.dropout = o.dropout;
  } else {
    config = config_from_flags(run, data.vocab_size);
  }
  config.validate();
  GLASS_CHECK(config.vocab_size >= data.vocab_size,
              "the model's vocabulary ({}) is smaller than the data's ({})", config.vocab_size,
              data.vocab_size);
  GLASS_CHECK(o.seq_len <= config.block_size,
              "--seq-len {} is longer than the model's block size {}", o.seq_len,
              config.block_size);
  return config;
}

}  // namespace glass::train
