// train/run_config.h without a model: resolve() turns train_gpt's flags into typed choices, keeps
// which model flags were given, and refuses each bad flag with its own message; resolve_model()
// reconciles the flags with --resume's checkpoint, --init's weights and the data. Everything here
// reads no file and builds no model (the data and the files are made in memory).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/testing.h"
#include "train/run_config.h"

namespace glass::train {
namespace {

TrainOptions cpu_options() {
  TrainOptions o;
  o.device = "cpu";
  return o;
}

// A text data set of `chars` (a character vocabulary), as load_text makes it.
Dataset text_data(const std::string& chars = "abcdefgh") {
  Dataset d;
  d.path = "text.txt";
  d.vocab = CharVocab::from_text(chars);
  d.vocab_size = d.vocab->size();
  d.train = std::vector<int32_t>(64, 0);
  d.val = std::vector<int32_t>(16, 0);
  return d;
}

// A checkpoint of a gpt2 of width 16 trained at T=8 for 5 steps on text_data().
LoadedCheckpoint checkpoint() {
  LoadedCheckpoint ck;
  ck.path = "ck/ckpt_5.safetensors";
  ck.state.step = 5;
  ck.state.config = GPTConfig{
      .vocab_size = 8, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 16, .dropout = 0};
  ck.state.seq_len = 8;
  ck.state.data_path = "text.txt";
  ck.state.char_vocab = char_vocab_metadata(*text_data().vocab);
  return ck;
}

std::string resolve_error(const std::function<void(TrainOptions&)>& set) {
  TrainOptions o = cpu_options();
  set(o);
  return testing::error_of([&] { resolve(o); });
}

TEST(RunConfig, DefaultsAreTrainGptsAndNoModelFlagIsGiven) {
  const TrainOptions o = cpu_options();
  const RunConfig run = resolve(o);
  EXPECT_EQ(run.device, kCPU);
  EXPECT_EQ(run.dtype, DType::f32);  // the cpu's default
  EXPECT_EQ(run.arch, Arch::gpt2);
  EXPECT_TRUE(run.tie_embeddings);
  EXPECT_EQ(run.attention, AttentionKernel::automatic);
  EXPECT_EQ(run.recompute, Recompute::none);
  EXPECT_EQ(run.on_nonfinite, NonFinitePolicy::stop);
  EXPECT_EQ(run.save_format, WeightLayout::glass);
  const GivenModelFlags& g = run.given;
  EXPECT_FALSE(g.n_layer || g.n_head || g.n_embd || g.seq_len || g.vocab_size || g.dropout ||
               g.arch || g.n_kv_head || g.ffn_hidden || g.rope_theta || g.norm_eps ||
               g.tie_embeddings);
  // The numbers pass through as given.
  EXPECT_EQ(run.options.n_layer, o.n_layer);
  EXPECT_EQ(run.options.seq_len, o.seq_len);
  EXPECT_EQ(run.options.lr, o.lr);
  // The flags describe the model when no file does.
  const GPTConfig c = config_from_flags(run, 65);
  EXPECT_EQ(c.vocab_size, 65);
  EXPECT_EQ(c.n_layer, o.n_layer);
  EXPECT_EQ(c.n_embd, o.n_embd);
  EXPECT_EQ(c.block_size, o.seq_len);
  EXPECT_EQ(c.arch, Arch::gpt2);
}

TEST(RunConfig, AutoDeviceGetsItsDefaultDtype) {
  TrainOptions o;  // --device auto
  const RunConfig run = resolve(o);
  EXPECT_EQ(run.dtype, run.device.kind == DeviceKind::cuda ? DType::bf16 : DType::f32);
}

TEST(RunConfig, Bf16IsMixedPrecisionOnCpuToo) {
  TrainOptions o = cpu_options();
  o.dtype = "bf16";
  EXPECT_EQ(resolve(o).dtype, DType::bf16);
}

TEST(RunConfig, ChoicesAreTyped) {
  TrainOptions o = cpu_options();
  o.device = "emu";
  o.dtype = "bf16";
  o.on_nonfinite = "skip";
  o.attention = "flash-simt";
  o.recompute = "block";
  o.save_format = "hf";
  o.arch = "llama";
  o.tie_embeddings = "off";
  const RunConfig run = resolve(o);
  EXPECT_EQ(run.device, kEmu);
  EXPECT_EQ(run.dtype, DType::bf16);
  EXPECT_EQ(run.on_nonfinite, NonFinitePolicy::skip);
  EXPECT_EQ(run.attention, AttentionKernel::flash_simt);
  EXPECT_EQ(run.recompute, Recompute::block);
  EXPECT_EQ(run.save_format, WeightLayout::hf);
  EXPECT_EQ(run.arch, Arch::llama);
  EXPECT_FALSE(run.tie_embeddings);
  EXPECT_FALSE(config_from_flags(run, 10).tie_embeddings);
  EXPECT_STREQ(nonfinite_policy_name(NonFinitePolicy::skip), "skip");
}

TEST(RunConfig, GivenModelFlagsCarryTheirValues) {
  TrainOptions o = cpu_options();
  o.arch = "llama";
  o.n_layer = 3;
  o.n_kv_head = 1;
  o.seq_len = 32;
  o.tie_embeddings = "off";
  o.shape_flags_given = {"--n-layer", "--arch", "--n-kv-head", "--seq-len", "--tie-embeddings"};
  const GivenModelFlags g = resolve(o).given;
  EXPECT_EQ(g.n_layer, 3);
  EXPECT_EQ(g.arch, Arch::llama);
  EXPECT_EQ(g.n_kv_head, 1);
  EXPECT_EQ(g.seq_len, 32);
  EXPECT_EQ(g.tie_embeddings, false);
  EXPECT_FALSE(g.n_head || g.n_embd || g.vocab_size || g.dropout || g.ffn_hidden);
  o.shape_flags_given = {"--n_layer"};
  EXPECT_EQ(testing::error_of([&] { resolve(o); }),
            "--n_layer is not a flag of the model's configuration");
}

TEST(RunConfig, PresetSetsArchitectureAndVocabulary) {
  TrainOptions o = cpu_options();
  o.model = "gpt2";
  const RunConfig gpt2 = resolve(o);
  EXPECT_EQ(gpt2.arch, Arch::gpt2);
  EXPECT_EQ(gpt2.options.vocab_size, 50257);
  o.model = "llama-tiny";
  const RunConfig llama = resolve(o);
  EXPECT_EQ(llama.arch, Arch::llama);
  EXPECT_EQ(llama.options.arch, "llama");
  EXPECT_EQ(llama.options.vocab_size, 0);  // the data's
}

// Each flag's refusal, worded as train_gpt prints it (after "train_gpt: error: ").
TEST(RunConfig, EachBadFlagHasItsOwnMessage) {
  const std::vector<std::pair<std::function<void(TrainOptions&)>, std::string>> cases = {
      {[](TrainOptions& o) { o.steps = -1; }, "--steps -1 must be at least 1"},
      {[](TrainOptions& o) { o.seq_len = 0; }, "--seq-len 0 must be at least 1"},
      {[](TrainOptions& o) { o.batch = 0; }, "--batch 0 must be at least 1"},
      {[](TrainOptions& o) { o.grad_accum = 0; }, "--grad-accum must be at least 1, not 0"},
      {[](TrainOptions& o) { o.threads = -2; }, "--threads -2 must be 0 (all cores) or more"},
      {[](TrainOptions& o) { o.eval_every = -1; },
       "--eval-every -1 must be 0 (only at the end) or more"},
      {[](TrainOptions& o) { o.eval_batches = 0; }, "--eval-batches 0 must be at least 1"},
      {[](TrainOptions& o) { o.on_nonfinite = "ignore"; },
       "--on-nonfinite 'ignore': expected stop or skip"},
      {[](TrainOptions& o) { o.keep_last = -1; }, "--keep-last -1 must be 0 (keep all) or more"},
      {[](TrainOptions& o) { o.checkpoint_every = -1; },
       "--checkpoint-every -1 must be 0 (only at the end) or more"},
      {[](TrainOptions& o) { o.checkpoint_every = 10; },
       "--checkpoint-every 10 needs --checkpoint-dir: there is nowhere to write them"},
      {[](TrainOptions& o) {
         o.init = "w.safetensors";
         o.resume = "ck";
       },
       "--init w.safetensors and --resume ck: give one (--resume continues a run with its own "
       "weights; --init starts a new run from weights)"},
      {[](TrainOptions& o) { o.save_format = "onnx"; },
       "weight layout 'onnx': expected glass, hf, llmc or llama2c"},
      {[](TrainOptions& o) { o.zero = 2; },
       "--zero 2: expected 0 (every rank keeps all optimizer state) or 1 (ZeRO-1: each rank "
       "keeps 1/N of it)"},
      {[](TrainOptions& o) {
         o.zero = 1;
         o.cuda_graph = true;
       },
       "--cuda-graph with --zero 1 is not supported: the sharded step waits on the host for the "
       "gradient norm's all-reduce and the parameters' all-gather, which a CUDA graph cannot "
       "capture; drop one of the two flags"},
      {[](TrainOptions& o) { o.sample = -1; }, "--sample -1 must be 0 (no sample) or more"},
      {[](TrainOptions& o) { o.temperature = -1; }, "--temperature -1 must be >= 0"},
      {[](TrainOptions& o) { o.top_k = -1; }, "--top-k -1 must be >= 0"},
      {[](TrainOptions& o) { o.device = "meta"; },
       "--device meta: meta holds no data (shapes and launches only), so nothing can be trained "
       "on it; plan a step with `roofline step` (samples/roofline) instead"},
      {[](TrainOptions& o) { o.tf32 = true; },
       "--tf32 needs the TF32 GEMMs of the emu or cuda device; the cpu kernels are f32 (use "
       "--device emu, or drop --tf32)"},
      {[](TrainOptions& o) { o.dtype = "f16"; }, "--dtype f16: expected f32 or bf16"},
      {[](TrainOptions& o) { o.arch = "rnn"; },
       "unknown architecture 'rnn': expected gpt2 or llama"},
      {[](TrainOptions& o) { o.shape_flags_given = {"--rope-theta"}; },
       "--rope-theta is a llama flag: add --arch llama"},
      {[](TrainOptions& o) {
         o.model = "gpt2";
         o.arch = "llama";
         o.shape_flags_given = {"--arch"};
       },
       "--model gpt2 is a gpt2, but --arch is llama"},
      {[](TrainOptions& o) {
         o.model = "gpt2";
         o.vocab_size = 65;
       },
       "--model gpt2 has a vocabulary of 50257 tokens, but --vocab-size is 65"},
      {[](TrainOptions& o) { o.attention = "fast"; },
       "unknown attention kernel 'fast' (naive, flash, flash-simt, flash-mma, cudnn or auto)"},
  };
  for (const auto& [set, message] : cases) EXPECT_EQ(resolve_error(set), message);
  // Another module's wording, named by the value.
  EXPECT_TRUE(testing::contains_all(resolve_error([](TrainOptions& o) { o.recompute = "all"; }),
                                    {"'all'"}));
}

TEST(RunConfig, OnlyTheArchitectureGivenMayMatchThePreset) {
  TrainOptions o = cpu_options();
  o.model = "stories15m";
  o.arch = "gpt2";  // the default, not given: yields to the preset
  EXPECT_EQ(resolve(o).arch, Arch::llama);
  o.arch = "llama";
  o.shape_flags_given = {"--arch"};
  EXPECT_EQ(resolve(o).arch, Arch::llama);
}

TEST(RunConfig, ModelFromTheFlagsIsCheckedAgainstTheData) {
  TrainOptions o = cpu_options();
  o.n_layer = 2;
  o.n_head = 2;
  o.n_embd = 16;
  o.seq_len = 8;
  RunConfig run = resolve(o);
  Dataset data = text_data();
  const GPTConfig c = resolve_model(run, data, nullptr, nullptr);
  EXPECT_EQ(c.vocab_size, data.vocab_size);
  EXPECT_EQ(c.block_size, 8);
  EXPECT_EQ(c.n_embd, 16);

  Dataset tokens;
  tokens.path = "tokens.bin";
  tokens.vocab_size = 50257;
  o.model = "gpt2";
  RunConfig gpt2 = resolve(o);
  EXPECT_EQ(resolve_model(gpt2, tokens, nullptr, nullptr).table_rows(), 50304);
  EXPECT_EQ(testing::error_of([&] { resolve_model(gpt2, data, nullptr, nullptr); }),
            "--model gpt2 trains on llm.c token shards of GPT-2 tokens; text.txt is a text file "
            "(a character vocabulary of 8)");
}

TEST(RunConfig, ResumeTakesTheCheckpointsShapeUnlessAGivenFlagContradictsIt) {
  const LoadedCheckpoint ck = checkpoint();
  TrainOptions o = cpu_options();
  o.steps = 10;
  o.n_embd = 32;  // not given: yields
  RunConfig run = resolve(o);
  Dataset data = text_data();
  const GPTConfig c = resolve_model(run, data, &ck, nullptr);
  EXPECT_EQ(c.n_embd, 16);
  EXPECT_EQ(run.options.seq_len, 8);  // the checkpoint's

  o.shape_flags_given = {"--n-embd"};
  run = resolve(o);
  EXPECT_TRUE(
      testing::contains_all(testing::error_of([&] { resolve_model(run, data, &ck, nullptr); }),
                            {"--resume ck/ckpt_5.safetensors holds a model with ",
                             ", but --n-embd is 32 (checkpoint: 16)"}));

  o.shape_flags_given = {"--seq-len"};
  o.seq_len = 12;
  run = resolve(o);
  EXPECT_TRUE(
      testing::contains_all(testing::error_of([&] { resolve_model(run, data, &ck, nullptr); }),
                            {", but --seq-len is 12 (checkpoint: 8)"}));

  o.shape_flags_given = {"--dropout"};
  o.seq_len = 8;
  o.dropout = 0.5;
  run = resolve(o);
  EXPECT_TRUE(
      testing::contains_all(testing::error_of([&] { resolve_model(run, data, &ck, nullptr); }),
                            {", but --dropout is 0.5 (checkpoint: 0)"}));

  o.shape_flags_given.clear();
  o.steps = 4;
  run = resolve(o);
  EXPECT_EQ(testing::error_of([&] { resolve_model(run, data, &ck, nullptr); }),
            "--steps 4: --resume ck/ckpt_5.safetensors is already at step 5; --steps counts "
            "every step of the run, the checkpoint's included");

  o.steps = 10;
  run = resolve(o);
  Dataset other = text_data("abcdefgX");
  EXPECT_EQ(testing::error_of([&] { resolve_model(run, other, &ck, nullptr); }),
            "--resume ck/ckpt_5.safetensors was trained on text.txt (a character vocabulary of "
            "8), but --data text.txt has another one (of 8 characters): the token ids would mean "
            "other characters");
}

TEST(RunConfig, InitTakesTheFilesShapeAndTheFlagsFillWhatItDoesNotSay) {
  GPTWeights w;
  w.path = "w.safetensors";
  w.config = GPTConfig{
      .vocab_size = 8, .block_size = 16, .n_layer = 2, .n_head = 0, .n_embd = 16, .dropout = 0};
  TrainOptions o = cpu_options();
  o.init = w.path;
  o.n_head = 4;  // the file does not say: --n-head does
  o.seq_len = 8;
  o.dropout = 0.25;
  RunConfig run = resolve(o);
  Dataset data = text_data();
  const GPTConfig c = resolve_model(run, data, nullptr, &w);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.dropout, 0.25);

  o.n_layer = 3;
  o.shape_flags_given = {"--n-layer"};
  run = resolve(o);
  EXPECT_TRUE(
      testing::contains_all(testing::error_of([&] { resolve_model(run, data, nullptr, &w); }),
                            {"--init w.safetensors (glass layout) holds a model with ",
                             ", but --n-layer is 3 (file: 2)"}));
}

TEST(RunConfig, TheModelMustHoldTheDataAndTheSequence) {
  TrainOptions o = cpu_options();
  o.vocab_size = 4;
  o.seq_len = 8;
  RunConfig run = resolve(o);
  Dataset data = text_data();
  LoadedCheckpoint small = checkpoint();
  small.state.config.vocab_size = 4;
  small.state.char_vocab.reset();
  EXPECT_EQ(testing::error_of([&] { resolve_model(run, data, &small, nullptr); }),
            "the model's vocabulary (4) is smaller than the data's (8)");
  LoadedCheckpoint ck = checkpoint();
  o.seq_len = 32;
  o.shape_flags_given = {"--seq-len"};
  ck.state.seq_len = 0;  // older checkpoints did not record it: not checked, but the block size is
  run = resolve(o);
  EXPECT_EQ(testing::error_of([&] { resolve_model(run, data, &ck, nullptr); }),
            "--seq-len 32 is longer than the model's block size 16");
}

}  // namespace
}  // namespace glass::train
