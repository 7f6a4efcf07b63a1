// GPT weights in glass's, Hugging Face's and llm.c's layouts (nn/gpt_weights.h).
//
// Against an independent implementation: tests/oracle/gpt2_layouts.py writes a random GPT in
// Hugging Face's layout (with and without the "transformer." prefix) and in llm.c's (f32 and bf16)
// with its own writer, and PyTorch's logits; glass loads each and must give those logits. The other
// way, glass's files are read by the script's own readers and PyTorch's logits of them must be
// glass's. Without PyTorch these skip (or fail, under make test), as tests/nn/test_torch_oracle.cpp
// does. Then, without PyTorch: every layout round-trips bit for bit, and bad files are clear
// errors.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nn/gpt_weights.h"
#include "nn/hf_weights.h"
#include "nn/llmc_weights.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

const std::string kScript = std::string(GLASS_SOURCE_DIR) + "/tests/oracle/gpt2_layouts.py";

// A model built for `w`'s shape (n_head given where the file has none) holding its weights.
std::unique_ptr<GPT> model_of(const GPTWeights& w, int64_t n_head = 0) {
  GPTConfig c = w.config;
  if (c.n_head == 0) c.n_head = n_head;
  auto model = std::make_unique<GPT>(c);
  model->load_state_dict(w.state);
  model->eval();
  return model;
}

// The first V columns of a model's logits for `x`: the classes (llm.c pads the table).
std::vector<double> class_logits(const GPT& model, const Tensor& x) {
  const Tensor logits = model.forward(x);
  const int64_t V = model.config.vocab_size;
  return values(contiguous(slice(logits, 2, 0, V)));
}

TEST(GptWeightsOracle, PyTorchsHfAndLlmcFilesGivePyTorchsLogitsAndGlasssFilesReadBack) {
  const std::string dir = scratch_path("layouts");
  const OracleRun written = run_torch_oracle(
      fmt::format("{} {} write --out-dir {} --seed 7", kTorchPython, kScript, dir));
  if (written.skip) GTEST_SKIP() << written.message;
  ASSERT_TRUE(written.ran) << written.message;
  const SafeTensorsFile ref = load_safetensors(dir + "/oracle.safetensors");
  const Tensor& x = ref.at("x");
  const int64_t n_head = std::stoll(ref.metadata.at("n_head"));

  // 1. Each layout, detected from the file, gives PyTorch's logits within 1e-5 relative.
  struct Case {
    const char* file;
    WeightLayout layout;
    const char* logits;
  };
  for (const Case& c : {Case{"hf.safetensors", WeightLayout::hf, "logits"},
                        Case{"hf_prefixed.safetensors", WeightLayout::hf, "logits"},
                        Case{"llmc.bin", WeightLayout::llmc, "logits"},
                        Case{"llmc_bf16.bin", WeightLayout::llmc, "logits_bf16"}}) {
    SCOPED_TRACE(c.file);
    const GPTWeights w = load_gpt_weights(dir + "/" + c.file);
    EXPECT_EQ(w.layout, c.layout);
    EXPECT_EQ(w.config.vocab_size, 65);
    EXPECT_EQ(w.config.n_layer, 2);
    EXPECT_EQ(w.config.n_embd, 32);
    EXPECT_EQ(w.config.block_size, 16);
    // llm.c's header has the heads and the padded vocabulary; Hugging Face's file has neither.
    EXPECT_EQ(w.config.n_head, c.layout == WeightLayout::llmc ? n_head : 0);
    EXPECT_EQ(w.config.table_rows(), c.layout == WeightLayout::llmc ? 128 : 65);
    const auto model = model_of(w, n_head);
    EXPECT_TRUE(all_close(class_logits(*model, x), values(ref.at(c.logits)), 1e-5));
  }

  // 2. glass's own Hugging Face and llm.c files, read by the script's readers, give glass's logits.
  const auto model = model_of(load_gpt_weights(dir + "/llmc.bin"));
  save_gpt_weights(dir + "/glass_hf.safetensors", WeightLayout::hf, *model);
  save_gpt_weights(dir + "/glass_llmc.bin", WeightLayout::llmc, *model);
  save_safetensors(dir + "/x.safetensors", {{"x", x}});
  const OracleRun read = run_torch_oracle(fmt::format(
      "{} {} logits --hf {}/glass_hf.safetensors --n-head {} --llmc {}/glass_llmc.bin --batch "
      "{}/x.safetensors --out {}/glass_logits.safetensors",
      kTorchPython, kScript, dir, n_head, dir, dir, dir));
  ASSERT_TRUE(read.ran) << read.message;
  const SafeTensorsFile theirs = load_safetensors(dir + "/glass_logits.safetensors");
  const std::vector<double> ours = class_logits(*model, x);
  EXPECT_TRUE(all_close(ours, values(theirs.at("logits.hf")), 1e-5));
  EXPECT_TRUE(all_close(ours, values(theirs.at("logits.llmc")), 1e-5));
}

// A GPT with every parameter random (biases and LayerNorms too, so that a misplaced one shows)
// and a padded vocabulary (llm.c's Vp).
std::unique_ptr<GPT> random_gpt() {
  auto model = std::make_unique<GPT>(GPTConfig{.vocab_size = 61,
                                               .block_size = 8,
                                               .n_layer = 2,
                                               .n_head = 2,
                                               .n_embd = 16,
                                               .padded_vocab_size = 64});
  Generator gen(99);
  NamedTensors state;
  for (const auto& [name, p] : model->named_parameters())
    state.emplace_back(name, rnd(p.shape(), gen, DType::f32));
  model->load_state_dict(state);
  return model;
}

// Every parameter of `a` equals `b`'s bit for bit; wte over b's rows only (Hugging Face's file has
// no padded rows).
void expect_same_bits(const GPT& a, const GPT& b) {
  const NamedTensors pa = a.named_parameters(), pb = b.named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_EQ(pa[i].first, pb[i].first);
    const Tensor want = pa[i].first == "transformer.wte.weight"
                            ? contiguous(slice(pa[i].second, 0, 0, pb[i].second.size(0)))
                            : pa[i].second;
    EXPECT_EQ(f32_values({want}), f32_values({pb[i].second})) << pa[i].first;
  }
}

TEST(GptWeights, EachLayoutRoundTripsBitForBit) {
  const auto model = random_gpt();
  for (WeightLayout layout : {WeightLayout::glass, WeightLayout::hf, WeightLayout::llmc}) {
    SCOPED_TRACE(weight_layout_name(layout));
    const std::string first = scratch_path(fmt::format("first.{}", weight_layout_name(layout)));
    const std::string second = scratch_path(fmt::format("second.{}", weight_layout_name(layout)));
    save_gpt_weights(first, layout, *model);
    const GPTWeights w = load_gpt_weights(first);
    EXPECT_EQ(w.layout, layout);
    const auto loaded = model_of(w, model->config.n_head);
    expect_same_bits(*model, *loaded);
    // Hugging Face's layout keeps no padded rows, and glass's metadata says so: the loaded model
    // has 61 rows; the others keep llm.c's 64.
    EXPECT_EQ(loaded->config.table_rows(), layout == WeightLayout::hf ? 61 : 64);
    EXPECT_EQ(loaded->config.n_head, 2);  // from glass's metadata or llm.c's header
    save_gpt_weights(second, layout, *loaded);
    EXPECT_TRUE(file_bytes(first) == file_bytes(second)) << "saved again, the file differs";
  }
  // llm.c's bf16 file (version 5): the weights rounded to bf16, then stable.
  const std::string first = scratch_path("first_bf16.bin"),
                    second = scratch_path("second_bf16.bin");
  save_gpt_weights(first, WeightLayout::llmc, *model, DType::bf16);
  const GPTWeights w = load_gpt_weights(first);
  EXPECT_EQ(w.state[0].second.dtype(), DType::bf16);
  EXPECT_EQ(file_bytes(first).size(),
            kLlmcHeaderBytes + 2 * static_cast<size_t>(gpt_num_parameters(model->config)));
  save_gpt_weights(second, WeightLayout::llmc, *model_of(w), DType::bf16);
  EXPECT_TRUE(file_bytes(first) == file_bytes(second));
}

// An llm.c header with `fields` (maxT, V, L, H, C, Vp) followed by `param_bytes` zero bytes.
std::string llmc_file(int32_t version, std::vector<int32_t> fields, size_t param_bytes) {
  std::vector<int32_t> header(256, 0);
  header[0] = kLlmcMagic;
  header[1] = version;
  std::copy(fields.begin(), fields.end(), header.begin() + 2);
  std::string bytes(reinterpret_cast<const char*>(header.data()), kLlmcHeaderBytes);
  return bytes + std::string(param_bytes, '\0');
}

TEST(GptWeights, BadLlmcFilesAreClearErrorsBeforeAnyAllocation) {
  // maxT=4 V=8 L=1 H=2 C=4 Vp=8: 8*4 + 4*4 + (12*16 + 13*4) + 2*4 = 300 floats.
  const std::vector<int32_t> ok = {4, 8, 1, 2, 4, 8};
  EXPECT_EQ(parse_llmc_weights(llmc_file(3, ok, 1200), "ok.bin").config.n_layer, 1);
  EXPECT_TRUE(contains_all(error_of([] { parse_llmc_weights("short", "s.bin"); }),
                           {"s.bin", "5 bytes", "1024-byte header"}));
  EXPECT_TRUE(contains_all(error_of([&] { parse_llmc_weights(llmc_file(4, ok, 1200), "v.bin"); }),
                           {"v.bin", "version 4 at byte 4", "3 (f32)", "5 (bf16)"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             parse_llmc_weights(llmc_file(3, {4, 8, 0, 2, 4, 8}, 0), "l.bin");
                           }),
                           {"l.bin", "header field L (byte 16) is 0"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             parse_llmc_weights(llmc_file(3, {4, 8, 1, 3, 4, 8}, 1200), "h.bin");
                           }),
                           {"h.bin", "C=4 is not divisible by H=3"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             parse_llmc_weights(llmc_file(3, {4, 8, 1, 2, 4, 7}, 1200), "p.bin");
                           }),
                           {"p.bin", "padded V 7 is smaller than V 8"}));
  EXPECT_TRUE(contains_all(error_of([&] { parse_llmc_weights(llmc_file(3, ok, 1196), "t.bin"); }),
                           {"t.bin", "needs 1200 bytes", "has 1196", "truncated"}));
  EXPECT_TRUE(contains_all(error_of([&] { parse_llmc_weights(llmc_file(5, ok, 1200), "b.bin"); }),
                           {"b.bin", "bf16", "needs 600 bytes", "has 1200", "trailing"}));
  // An absurd header (2^31-1 layers of width 2^31-1) is refused by arithmetic, not by a failed
  // allocation.
  const int32_t big = 2147483647;
  EXPECT_TRUE(
      contains_all(error_of([&] {
                     parse_llmc_weights(llmc_file(3, {big, big, big, 1, big, big}, 8), "x.bin");
                   }),
                   {"x.bin", "has 8"}));
  EXPECT_TRUE(contains_all(error_of([] { load_gpt_weights("/nonexistent/w.bin"); }),
                           {"/nonexistent/w.bin", "cannot open"}));
}

TEST(GptWeights, HfFilesWithStrangeTensorsAreClearErrors) {
  auto model = random_gpt();
  NamedTensors hf = glass_to_hf(*model);
  EXPECT_EQ(hf[2].first, "h.0.ln_1.weight");
  EXPECT_EQ(hf[4].second.shape(), (Shape{16, 48}));  // h.0.attn.c_attn.weight, Conv1D [C, 3C]
  EXPECT_EQ(hf_to_glass(hf, "ok")[4].second.shape(), (Shape{48, 16}));
  NamedTensors other = hf;
  other.emplace_back("score.weight", Tensor::empty({2, 16}));
  EXPECT_TRUE(
      contains_all(error_of([&] { hf_to_glass(other, "o.safetensors"); }),
                   {"o.safetensors", "'score.weight'", "not part of Hugging Face's GPT-2"}));
  NamedTensors untied = hf;
  untied.emplace_back("lm_head.weight", zeros({61, 16}));
  EXPECT_TRUE(contains_all(error_of([&] { hf_to_glass(untied, "u.safetensors"); }),
                           {"u.safetensors", "lm_head.weight", "ties the LM head to wte"}));
}

TEST(GptWeights, ShapeDifferencesNameEachField) {
  const GPTConfig file{.vocab_size = 65, .block_size = 16, .n_layer = 2, .n_head = 0, .n_embd = 32};
  EXPECT_EQ(shape_differences(file, GPTConfig::gpt2()),
            "vocab_size 65 vs 50257, block_size 16 vs 1024, n_layer 2 vs 12, n_embd 32 vs 768");
  EXPECT_EQ(shape_differences(file, file), "");
  EXPECT_EQ(parse_config_metadata(GPTConfig::gpt2().str(), "m").str(), GPTConfig::gpt2().str());
  EXPECT_TRUE(contains_all(error_of([] { parse_config_metadata("n_layer=x", "meta"); }),
                           {"meta", "n_layer = 'x'"}));
  EXPECT_EQ(parse_weight_layout("llmc"), WeightLayout::llmc);
  EXPECT_TRUE(contains_all(error_of([] { parse_weight_layout("onnx"); }),
                           {"'onnx'", "glass, hf, llmc or llama2c"}));
}

// glass's files carry their shape as JSON, the form checkpoints have always used; weights files
// written before, with GPTConfig::str()'s key=value form, still load.
TEST(GptWeights, ConfigMetadataIsJsonAndOldKeyValueFilesStillLoad) {
  const auto model = random_gpt();
  const std::string text = config_metadata(model->config);
  EXPECT_EQ(text.front(), '{') << text;
  EXPECT_EQ(parse_config_metadata(text, "m").str(), model->config.str());
  const std::string saved = scratch_path("json_config.safetensors");
  save_gpt_weights(saved, WeightLayout::glass, *model);
  EXPECT_EQ(load_safetensors(saved).metadata.at("config"), text);

  const std::string old = scratch_path("key_value_config.safetensors");
  save_safetensors(old, model->named_parameters(),
                   {{"format", "pt"}, {"config", model->config.str()}});
  const GPTWeights w = load_gpt_weights(old);
  EXPECT_EQ(w.config.n_head, 2);
  EXPECT_EQ(w.config.table_rows(), 64);
  expect_same_bits(*model, *model_of(w));
}

TEST(GptWeights, MalformedConfigMetadataNamesTheFileAndTheProblem) {
  const auto model = random_gpt();
  const std::string path = scratch_path("bad_config.safetensors");
  auto error_with_config = [&](const std::string& config) {
    save_safetensors(path, model->named_parameters(), {{"format", "pt"}, {"config", config}});
    return error_of([&] { load_gpt_weights(path); });
  };
  EXPECT_TRUE(contains_all(error_with_config(R"({"n_layer": 2,)"), {path, "not valid JSON"}));
  EXPECT_TRUE(
      contains_all(error_with_config(R"({"vocab_size":61,"block_size":8,"n_layer":2,"n_embd":16})"),
                   {path, "has no n_head"}));
  EXPECT_TRUE(contains_all(
      error_with_config(R"({"vocab_size":61,"block_size":8,"n_layer":2.5,"n_head":2,"n_embd":16})"),
      {path, "n_layer = 2.5 is not a non-negative integer"}));
  EXPECT_TRUE(contains_all(error_with_config("n_layer:2"),
                           {path, "'n_layer:2' is not key=value (and the config is not JSON)"}));
}

// A training checkpoint (train/checkpoint.h's layout, built here by hand: test_nn has no trainer)
// gives its model.* weights; the optimizer's state is left out.
TEST(GptWeights, ACheckpointGivesItsWeightsWithoutTheOptimizerState) {
  const auto model = random_gpt();
  NamedTensors tensors;
  for (const auto& [name, t] : model->named_parameters()) {
    tensors.emplace_back("model." + name, t);
    tensors.emplace_back("optim.exp_avg." + name, zeros(t.shape()));
  }
  const std::string path = scratch_path("ckpt_00000004.safetensors");
  save_safetensors(path, tensors,
                   {{"format", "glass-checkpoint-1"}, {"config", config_metadata(model->config)}});
  const GPTWeights w = load_gpt_weights(path);
  EXPECT_EQ(w.layout, WeightLayout::glass);
  EXPECT_EQ(w.state.size(), model->named_parameters().size());
  expect_same_bits(*model, *model_of(w));
}

TEST(GptWeights, PaddingTheVocabularyAddsZeroRows) {
  const Tensor wte = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  const NamedTensors padded = pad_vocab_rows({{"transformer.wte.weight", wte}}, 5);
  EXPECT_EQ(values(padded[0].second), (std::vector<double>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             pad_vocab_rows({{"transformer.wte.weight", wte}}, 2);
                           }),
                           {"cannot grow wte", "to 2 rows"}));
}

}  // namespace
}  // namespace glass
