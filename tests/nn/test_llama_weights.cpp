// A llama's weights in every layout (nn/gpt_weights.h: glass, Hugging Face with config.json,
// llama2.c with tokenizer.bin), on random state dicts in glass's llama names (nn/llama_state.h).
//
// Round trips are bit-exact, with grouped-query attention and an untied head. The q/k row
// permutation of llama2.c's file is checked by what it is for, independently of its own inverse:
// the q and k rows read straight out of the file's bytes, rotated by llama2.c's RoPE (adjacent
// pairs), must give the rotated vectors of glass's rows under Hugging Face's RoPE (two halves),
// dimension 2j <-> j and 2j+1 <-> j + D/2, and the same attention scores. Then bad input: every
// damaged file is one glass::Error naming the tensor, field or byte, never a crash.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "nn/causal_lm.h"
#include "nn/gpt_weights.h"
#include "nn/hf_llama_weights.h"
#include "nn/llama2c_tokenizer.h"
#include "nn/llama2c_weights.h"
#include "nn/llama_state.h"
#include "nn/safetensors.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

GPTConfig llama_config(int64_t n_head, int64_t n_kv_head, bool tie, int64_t padded = 0) {
  return {.vocab_size = 11,
          .block_size = 8,
          .n_layer = 2,
          .n_head = n_head,
          .n_embd = 16,
          .dropout = 0,
          .padded_vocab_size = padded,
          .arch = Arch::llama,
          .n_kv_head = n_kv_head,
          .ffn_hidden = 24,
          .rope_theta = 10000,
          .norm_eps = 1e-5,
          .tie_embeddings = tie};
}

// Standard-normal f32 values for every parameter of `c`, in glass's names.
NamedTensors random_llama_state(const GPTConfig& c, uint64_t seed) {
  Generator gen(seed);
  NamedTensors state;
  for (const auto& [name, shape] : llama_parameter_shapes(c))
    state.emplace_back(name, randn(shape, gen, 0, 1, DType::f32));
  return state;
}

std::string bits(const Tensor& t) {
  const Tensor c = contiguous(t);
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

// `b` holds exactly `a`'s tensors with the same bits; `rows` > 0 compares only the first `rows`
// rows of the embedding and lm_head (layouts without padding rows).
void expect_same_state(const NamedTensors& a, const NamedTensors& b, int64_t rows = 0) {
  std::map<std::string, Tensor> by_name(b.begin(), b.end());
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(by_name.contains(name));
    const Tensor& other = by_name.at(name);
    const bool table = name == kLlamaEmbedding || name == kLlamaLmHead;
    const Tensor want = table && rows > 0 ? row_range(t, 0, rows) : t;
    EXPECT_EQ(shape_str(want.shape()), shape_str(other.shape()));
    EXPECT_EQ(other.dtype(), DType::f32);
    EXPECT_TRUE(bits(want) == bits(other)) << "values differ";
  }
}

// A directory of its own for each case: Hugging Face's config.json goes beside the weights.
std::string case_dir(const std::string& name) {
  const std::string dir = scratch_path(name);
  std::filesystem::create_directories(dir);
  return dir;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct Case {
  const char* name;
  GPTConfig config;
};
const Case kCases[] = {{"mha_tied", llama_config(4, 0, true)},
                       {"gqa_untied", llama_config(4, 2, false)},
                       {"mqa_padded", llama_config(2, 1, false, 16)}};

TEST(LlamaWeights, EachLayoutRoundTripsBitForBit) {
  for (const Case& c : kCases) {
    for (WeightLayout layout : {WeightLayout::glass, WeightLayout::hf, WeightLayout::llama2c}) {
      SCOPED_TRACE(fmt::format("{} {}", c.name, weight_layout_name(layout)));
      const NamedTensors state = random_llama_state(c.config, 3);
      const std::string dir = case_dir(fmt::format("{}_{}", c.name, weight_layout_name(layout)));
      const std::string path = dir + "/model.bin";
      save_llama_weights(path, layout, state, c.config);
      const GPTWeights w = load_gpt_weights(path);
      EXPECT_EQ(w.layout, layout);
      // Hugging Face's and llama2.c's files have no padding rows.
      GPTConfig want = c.config;
      if (layout != WeightLayout::glass) want.padded_vocab_size = 0;
      if (want.n_kv_head == 0) want.n_kv_head = want.n_head;
      EXPECT_EQ(w.config.str(), want.str());
      expect_same_state(state, w.state, layout == WeightLayout::glass ? 0 : c.config.vocab_size);
      // Written again from what was read: the same model (llama2.c's file: the same bytes).
      save_llama_weights(dir + "/again.bin", layout, w.state, w.config);
      const GPTWeights again = load_gpt_weights(dir + "/again.bin");
      EXPECT_EQ(again.config.str(), w.config.str());
      expect_same_state(w.state, again.state);
      if (layout == WeightLayout::llama2c) {
        EXPECT_TRUE(file_bytes(path) == file_bytes(dir + "/again.bin")) << "saved again, differs";
      }
    }
  }
}

// Through real models (nn/llama.h): a llama saved in each layout by save_gpt_weights and built
// again from the file gives the same logits, so greedy sampling draws the same tokens from each
// file (with grouped-query attention, an untied head and padded rows too).
TEST(LlamaWeights, ARealLlamaSavedInEachLayoutGivesTheSameLogits) {
  const Tensor ids = from_vector<int32_t>({3, 1, 4, 1, 5, 9}, {1, 6});
  for (const Case& c : kCases) {
    Generator gen(21);
    const auto model = make_model(c.config);
    model->init(gen);
    model->eval();
    const int64_t V = c.config.vocab_size;
    const Tensor want = contiguous(slice(model->forward(ids), 2, 0, V));
    for (WeightLayout layout : {WeightLayout::glass, WeightLayout::hf, WeightLayout::llama2c}) {
      SCOPED_TRACE(fmt::format("{} {}", c.name, weight_layout_name(layout)));
      const std::string dir =
          case_dir(fmt::format("real_{}_{}", c.name, weight_layout_name(layout)));
      save_gpt_weights(dir + "/model.bin", layout, *model);
      const GPTWeights w = load_gpt_weights(dir + "/model.bin");
      const auto loaded = make_model(w.config);
      loaded->load_state_dict(w.state);
      loaded->eval();
      expect_same_state(model->named_parameters(), loaded->named_parameters(),
                        layout == WeightLayout::glass ? 0 : V);
      const Tensor got = contiguous(slice(loaded->forward(ids), 2, 0, V));
      EXPECT_TRUE(all_close(got, want, 1e-6, 1e-7));
      // Greedy: the most likely class at each position.
      const std::vector<double> a = values(got), b = values(want);
      for (size_t t = 0; t < 6; ++t) {
        const auto row_a = a.begin() + t * V, row_b = b.begin() + t * V;
        EXPECT_EQ(std::max_element(row_a, row_a + V) - row_a,
                  std::max_element(row_b, row_b + V) - row_b);
      }
    }
  }
}

TEST(LlamaWeights, HfNamesAndConfigJsonAreHuggingFaces) {
  const GPTConfig c = llama_config(4, 2, false);
  const std::string dir = case_dir("hf_names");
  save_llama_weights(dir + "/model.safetensors", WeightLayout::hf, random_llama_state(c, 5), c);
  const SafeTensorsFile f = load_safetensors(dir + "/model.safetensors");
  EXPECT_EQ(shape_str(f.at("model.layers.1.self_attn.q_proj.weight").shape()), "[16, 16]");
  EXPECT_EQ(shape_str(f.at("model.layers.1.self_attn.k_proj.weight").shape()), "[8, 16]");
  EXPECT_EQ(shape_str(f.at("model.layers.1.self_attn.v_proj.weight").shape()), "[8, 16]");
  EXPECT_EQ(shape_str(f.at("model.layers.0.mlp.gate_proj.weight").shape()), "[24, 16]");
  EXPECT_EQ(shape_str(f.at("model.layers.0.mlp.up_proj.weight").shape()), "[24, 16]");
  EXPECT_EQ(shape_str(f.at("lm_head.weight").shape()), "[11, 16]");
  const std::string json = file_bytes(dir + "/config.json");
  EXPECT_TRUE(contains_all(json, {"\"model_type\": \"llama\"", "\"num_key_value_heads\": 2",
                                  "\"intermediate_size\": 24", "\"tie_word_embeddings\": false",
                                  "\"max_position_embeddings\": 8", "LlamaForCausalLM"}));
  EXPECT_EQ(parse_hf_llama_config(json, "c").str(), [&] {
    GPTConfig want = c;
    return want.str();
  }());

  // Without config.json (and without the metadata glass adds) the heads are unknown: the caller's
  // n_head completes the shape.
  std::filesystem::remove(dir + "/config.json");
  save_safetensors(dir + "/model.safetensors", f.tensors);
  const GPTWeights w = load_gpt_weights(dir + "/model.safetensors");
  EXPECT_EQ(w.config.n_head, 0);
  EXPECT_EQ(w.config.block_size, 0);
  GPTConfig flags = w.config;
  flags.n_head = 4;
  flags.block_size = 8;
  EXPECT_EQ(config_of_weights(w.state, flags, w.path).str(), c.str());
  // A head count the qkv rows cannot hold names the tensor.
  flags.n_head = 1;
  EXPECT_TRUE(contains_all(error_of([&] { config_of_weights(w.state, flags, w.path); }),
                           {"model.layers.0.self_attn.qkv_proj.weight", "[32, 16]", "n_head 1"}));
  flags.n_head = 3;
  EXPECT_TRUE(contains_all(error_of([&] { config_of_weights(w.state, flags, w.path); }),
                           {"n_head 3 does not divide n_embd 16", "model.embed_tokens.weight"}));
}

// RoPE at position `pos` in llama2.c's convention: dims (2j, 2j+1) of each head rotated by
// pos * theta^(-2j/D).
std::vector<double> rope_adjacent(std::vector<double> v, int64_t D, int64_t pos) {
  for (size_t h = 0; h < v.size(); h += D)
    for (int64_t j = 0; j < D / 2; ++j) {
      const double a = pos * std::pow(10000.0, -2.0 * j / D);
      const double x = v[h + 2 * j], y = v[h + 2 * j + 1];
      v[h + 2 * j] = x * std::cos(a) - y * std::sin(a);
      v[h + 2 * j + 1] = x * std::sin(a) + y * std::cos(a);
    }
  return v;
}

// RoPE in Hugging Face's convention: dims (j, j + D/2) of each head, the same angles.
std::vector<double> rope_halves(std::vector<double> v, int64_t D, int64_t pos) {
  for (size_t h = 0; h < v.size(); h += D)
    for (int64_t j = 0; j < D / 2; ++j) {
      const double a = pos * std::pow(10000.0, -2.0 * j / D);
      const double x = v[h + j], y = v[h + j + D / 2];
      v[h + j] = x * std::cos(a) - y * std::sin(a);
      v[h + j + D / 2] = x * std::sin(a) + y * std::cos(a);
    }
  return v;
}

// rows [row0, row0 + n) of a row-major f32 matrix with `cols` columns at `data`, times x.
std::vector<double> matvec(const float* data, int64_t row0, int64_t n, int64_t cols,
                           const std::vector<double>& x) {
  std::vector<double> y(n, 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < cols; ++k) y[r] += data[(row0 + r) * cols + k] * x[k];
  return y;
}

TEST(LlamaWeights, Llama2cRowOrderGivesHuggingFacesRopeUnderLlama2csRope) {
  const GPTConfig c = llama_config(4, 2, true);
  const int64_t C = c.n_embd, D = c.head_dim(), H = c.n_head, Hkv = c.kv_heads(), V = c.vocab_size,
                L = c.n_layer;
  const NamedTensors state = random_llama_state(c, 11);
  const std::string file = llama2c_weights_bytes(state, c);
  // wq and wk of layer 1, straight from the file: after the header, the embedding, rms_att and
  // (for wk) all of wq.
  const auto* f32 = reinterpret_cast<const float*>(file.data() + kLlama2cHeaderBytes);
  const float* wq = f32 + V * C + L * C;
  const float* wk = wq + L * C * C;
  const Tensor qkv =
      contiguous(find_tensor(state, llama_layer_name(1, "self_attn.qkv_proj.weight"), "s"));
  const float* glass_rows = static_cast<const float*>(qkv.raw_data());
  std::vector<double> x(C);
  for (int64_t i = 0; i < C; ++i) x[i] = std::sin(1.0 + 0.7 * i);
  for (int64_t pos : {0, 1, 5}) {
    SCOPED_TRACE(pos);
    const auto q2c = rope_adjacent(matvec(wq, C, C, C, x), D, pos);  // layer 1
    const auto k2c = rope_adjacent(matvec(wk, Hkv * D, Hkv * D, C, x), D, pos + 2);
    const auto qhf = rope_halves(matvec(glass_rows, 0, H * D, C, x), D, pos);
    const auto khf = rope_halves(matvec(glass_rows, H * D, Hkv * D, C, x), D, pos + 2);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < D / 2; ++j) {
        EXPECT_NEAR(q2c[h * D + 2 * j], qhf[h * D + j], 1e-9);
        EXPECT_NEAR(q2c[h * D + 2 * j + 1], qhf[h * D + j + D / 2], 1e-9);
      }
    // The scores attention computes: q of head h against k of its group's head.
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / Hkv);
      double s2c = 0, shf = 0;
      for (int64_t d = 0; d < D; ++d) {
        s2c += q2c[h * D + d] * k2c[g * D + d];
        shf += qhf[h * D + d] * khf[g * D + d];
      }
      EXPECT_NEAR(s2c, shf, 1e-9);
    }
  }
  // A permutation that is its own inverse would pass a round trip: this one is not (D = 4).
  const Tensor w = from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {8, 1});
  EXPECT_EQ(values(rows_to_interleaved_rope(w, 2)), (std::vector<double>{0, 2, 1, 3, 4, 6, 5, 7}));
}

// The whole model, independently: tests/oracle/llama_layouts.py reads the llama2.c file as run.c
// does (adjacent-pair RoPE) and the Hugging Face files as transformers does (rotate-half), each
// with its own numpy forward; both files, written by glass from one model, must give the same
// logits.
TEST(LlamaWeights, Llama2cAndHfFilesGiveTheSameLogitsInNumpy) {
  const GPTConfig c = llama_config(4, 2, false);
  const NamedTensors state = random_llama_state(c, 12);
  const std::string dir = case_dir("numpy_oracle");
  save_llama_weights(dir + "/model.bin", WeightLayout::llama2c, state, c);
  save_llama_weights(dir + "/model.safetensors", WeightLayout::hf, state, c);
  const OracleRun r = run_torch_oracle(
      fmt::format("{} {}/tests/oracle/llama_layouts.py {}/model.bin {} 3,1,4,1,5,9", kTorchPython,
                  GLASS_SOURCE_DIR, dir, dir));
  if (r.skip) GTEST_SKIP() << r.message;
  EXPECT_TRUE(r.ran) << r.message;
}

TEST(LlamaWeights, Llama2cFileIsRunCsLayout) {
  const GPTConfig c = llama_config(4, 2, false, 16);
  const std::string file = llama2c_weights_bytes(random_llama_state(c, 2), c);
  int32_t header[7];
  std::memcpy(header, file.data(), sizeof(header));
  EXPECT_EQ((std::vector<int32_t>(header, header + 7)),
            (std::vector<int32_t>{16, 24, 2, 4, 2, -11, 8}));  // unshared: vocab_size negative
  const int64_t C = 16, F = 24, L = 2, V = 11, kv = 8, T = 8, D = 4;
  const int64_t floats = V * C + L * C + L * C * C + 2 * L * kv * C + L * C * C + L * C +
                         3 * L * F * C + C + T * D + V * C;
  EXPECT_EQ(file.size(), kLlama2cHeaderBytes + 4 * static_cast<size_t>(floats));
  // freq_cis_real[t][j] = cos(t theta^(-2j/D)): row 3, column 1.
  const auto* f32 = reinterpret_cast<const float*>(file.data() + kLlama2cHeaderBytes);
  const float* freq_real = f32 + floats - V * C - T * D;
  EXPECT_FLOAT_EQ(freq_real[3 * (D / 2) + 1],
                  static_cast<float>(std::cos(3 * std::pow(1e4, -0.5))));
  EXPECT_FLOAT_EQ(freq_real[T * D / 2 + 3 * (D / 2) + 1],
                  static_cast<float>(std::sin(3 * std::pow(1e4, -0.5))));
}

TEST(LlamaWeights, ConfigMetadataCarriesTheLlamaFields) {
  GPTConfig c = llama_config(4, 2, false, 16);
  c.rope_theta = 500000;
  c.norm_eps = 1e-6;
  const std::string text = config_metadata(c);
  EXPECT_TRUE(contains_all(text, {"\"arch\":\"llama\"", "\"n_kv_head\":2", "\"ffn_hidden\":24",
                                  "\"tie_embeddings\":false", "\"rope_theta\":500000.0"}));
  EXPECT_EQ(parse_config_metadata(text, "m").str(), c.str());
  // Written before llama: no "arch", a gpt2.
  const GPTConfig old = parse_config_metadata(
      R"({"vocab_size":65,"block_size":16,"n_layer":2,"n_head":2,"n_embd":32,"dropout":0.0})", "m");
  EXPECT_EQ(old.arch, Arch::gpt2);
  EXPECT_TRUE(contains_all(error_of([] {
                             parse_config_metadata(R"({"vocab_size":65,"block_size":16,"n_layer":2,
                               "n_head":2,"n_embd":32,"arch":"mamba"})",
                                                   "m");
                           }),
                           {"mamba", "gpt2 or llama"}));
  // A checkpoint's weights (model.* beside optim.*) are read with the llama's config.
  const std::string path = scratch_path("llama_ckpt.safetensors");
  NamedTensors tensors;
  for (const auto& [name, t] : random_llama_state(c, 4)) {
    tensors.emplace_back("model." + name, t);
    tensors.emplace_back("optim.m." + name, t);
  }
  save_safetensors(path, tensors, {{"format", "glass-checkpoint-1"}, {"config", text}});
  const GPTWeights w = load_gpt_weights(path);
  EXPECT_EQ(w.config.str(), c.str());
  EXPECT_EQ(w.state.size(), llama_parameter_shapes(c).size());
}

TEST(LlamaWeights, TokenizerBinRoundTripsAndIsRunCsLayout) {
  const std::vector<std::string> pieces = {"\n", " ", "!", "ab", "\xc3\xa9", ""};
  const std::string bytes = llama2c_tokenizer_bytes(pieces, {0, 1, 2, 3.5f, -1, 0});
  // max_token_length 2, then (score, length, bytes) per token.
  int32_t max_length = 0, length3 = 0;
  float score3 = 0;
  std::memcpy(&max_length, bytes.data(), 4);
  const size_t token3 = 4 + 3 * 8 + 1 + 1 + 1;
  std::memcpy(&score3, bytes.data() + token3, 4);
  std::memcpy(&length3, bytes.data() + token3 + 4, 4);
  EXPECT_EQ(max_length, 2);
  EXPECT_EQ(score3, 3.5f);
  EXPECT_EQ(length3, 2);
  EXPECT_EQ(bytes.substr(token3 + 8, 2), "ab");
  const std::string path = scratch_path("tokenizer.bin");
  save_llama2c_tokenizer(path, pieces);
  const Llama2cTokenizer read = load_llama2c_tokenizer(path, 6);
  EXPECT_EQ(read.pieces, pieces);
  EXPECT_EQ(read.scores, std::vector<float>(6, 0.0f));
  EXPECT_EQ(parse_llama2c_tokenizer(bytes, -1, "t").pieces, pieces);
  EXPECT_EQ(llama2c_tokenizer_path("out/model.bin"), "out/tokenizer.bin");
}

// --- bad input ---

TEST(LlamaWeights, HfFileMissingATensorOrDisagreeingWithConfigJsonIsNamed) {
  const GPTConfig c = llama_config(4, 2, false);
  const NamedTensors hf = glass_to_hf_llama(random_llama_state(c, 6), c);
  // 1. A tensor missing.
  {
    const std::string dir = case_dir("hf_missing");
    NamedTensors less;
    for (const auto& [n, t] : hf)
      if (n != "model.layers.1.self_attn.k_proj.weight") less.emplace_back(n, t);
    save_safetensors(dir + "/model.safetensors", less);
    EXPECT_TRUE(contains_all(error_of([&] { load_gpt_weights(dir + "/model.safetensors"); }),
                             {"model.layers.1.self_attn.k_proj.weight", "no tensor"}));
  }
  // 2. config.json against the tensors: each field and both values.
  const std::string dir = case_dir("hf_disagree");
  save_safetensors(dir + "/model.safetensors", hf);
  auto error_with = [&](GPTConfig json) {
    write_bytes(dir + "/config.json", hf_llama_config_json(json));
    return error_of([&] { load_gpt_weights(dir + "/model.safetensors"); });
  };
  GPTConfig wide = c;
  wide.n_embd = 32;
  EXPECT_TRUE(
      contains_all(error_with(wide), {"hidden_size 32", "model.embed_tokens.weight", "16"}));
  GPTConfig kv = c;
  kv.n_kv_head = 1;
  EXPECT_TRUE(contains_all(
      error_with(kv), {"num_key_value_heads", "model.layers.0.self_attn.k_proj.weight", "4", "8"}));
  GPTConfig ffn = c;
  ffn.ffn_hidden = 40;
  EXPECT_TRUE(contains_all(error_with(ffn), {"intermediate_size 40", "gate_proj", "24"}));
  GPTConfig tied = c;
  tied.tie_embeddings = true;
  EXPECT_TRUE(contains_all(error_with(tied), {"tie_word_embeddings true", "lm_head.weight"}));
  GPTConfig layers = c;
  layers.n_layer = 3;
  EXPECT_TRUE(contains_all(error_with(layers), {"num_hidden_layers 3", "2 layers"}));
  write_bytes(dir + "/config.json", R"({"model_type": "mistral", "hidden_size": 16})");
  EXPECT_TRUE(contains_all(error_of([&] { load_gpt_weights(dir + "/model.safetensors"); }),
                           {"model_type", "mistral"}));
  write_bytes(dir + "/config.json", R"({"model_type": "llama", "hidden_size": 16})");
  EXPECT_TRUE(contains_all(error_of([&] { load_gpt_weights(dir + "/model.safetensors"); }),
                           {"config.json has no intermediate_size"}));
  // An unknown tensor.
  NamedTensors more = hf;
  more.emplace_back("model.layers.0.self_attn.q_norm.weight", zeros({4}));
  EXPECT_TRUE(contains_all(error_of([&] { hf_llama_to_glass(more, "x.safetensors"); }),
                           {"model.layers.0.self_attn.q_norm.weight", "not part of"}));
}

// A llama2.c header of these 7 fields, then `floats` zero f32 values.
std::string llama2c_file(std::vector<int32_t> fields, size_t floats) {
  std::string bytes(reinterpret_cast<const char*>(fields.data()), 28);
  return bytes + std::string(4 * floats, '\0');
}

TEST(LlamaWeights, BadLlama2cHeadersNameTheField) {
  auto error = [](std::vector<int32_t> fields, size_t floats = 0) {
    return error_of([&] { parse_llama2c_weights(llama2c_file(fields, floats), "m.bin"); });
  };
  EXPECT_TRUE(contains_all(error({16, 24, -2, 4, 2, 11, 8}), {"m.bin", "n_layers", "-2"}));
  EXPECT_TRUE(contains_all(error({16, 24, 2, 4, 0, 11, 8}), {"n_kv_heads", "is 0"}));
  EXPECT_TRUE(contains_all(error({16, 24, 2, 4, 2, 0, 8}), {"vocab_size", "is 0"}));
  EXPECT_TRUE(
      contains_all(error({1 << 30, 24, 2, 4, 2, 11, 8}), {"dim", "1073741824", "not a model"}));
  EXPECT_TRUE(contains_all(error({16, 24, 2, 4, 2, 11, 2000000000}), {"seq_len", "2000000000"}));
  EXPECT_TRUE(contains_all(error({16, 24, 2, 3, 1, 11, 8}), {"dim 16", "n_heads 3"}));
  EXPECT_TRUE(contains_all(error({16, 24, 2, 4, 3, 11, 8}), {"n_kv_heads 3", "n_heads 4"}));
  EXPECT_TRUE(contains_all(error({12, 24, 2, 4, 2, 11, 8}), {"head dim", "odd"}));
  EXPECT_TRUE(contains_all(error_of([] { parse_llama2c_weights("tiny", "s.bin"); }),
                           {"s.bin", "4 bytes", "28-byte header"}));
  // The file's size against the header's: truncated, and one byte too many.
  const GPTConfig c = llama_config(4, 2, true);
  const std::string good = llama2c_weights_bytes(random_llama_state(c, 8), c);
  EXPECT_TRUE(contains_all(
      error_of([&] { parse_llama2c_weights(good.substr(0, good.size() - 4), "t.bin"); }),
      {"t.bin", "dim=16", "seq_len=8", std::to_string(good.size() - 28),
       std::to_string(good.size() - 32), "truncated"}));
  EXPECT_TRUE(contains_all(error_of([&] { parse_llama2c_weights(good + "x", "x.bin"); }),
                           {"trailing bytes"}));
  // Through load_gpt_weights: a damaged llama2.c file is reported as one, not as safetensors.
  const std::string path = scratch_path("damaged_llama2c.bin");
  write_bytes(path, good.substr(0, good.size() - 100));
  EXPECT_TRUE(contains_all(error_of([&] { load_gpt_weights(path); }),
                           {"llama2.c checkpoint", "truncated"}));
}

TEST(LlamaWeights, TruncatedTokenizerBinNamesTheTokenAndOffset) {
  const std::string bytes = llama2c_tokenizer_bytes({"a", "bc", "def"});
  // 4 + (8+1) + (8+2) = 23: token 2 starts there; its length field at 27, its bytes at 31.
  EXPECT_TRUE(contains_all(error_of([&] { parse_llama2c_tokenizer(bytes.substr(0, 29), 3, "t"); }),
                           {"token 2", "length", "byte offset 27", "ends at 29"}));
  EXPECT_TRUE(contains_all(error_of([&] { parse_llama2c_tokenizer(bytes.substr(0, 33), 3, "t"); }),
                           {"token 2", "3 bytes", "byte offset 31", "ends at 33"}));
  EXPECT_TRUE(contains_all(error_of([&] { parse_llama2c_tokenizer(bytes, 4, "t"); }),
                           {"token 3", "score", "byte offset 34"}));
  EXPECT_TRUE(contains_all(error_of([&] { parse_llama2c_tokenizer(bytes, 2, "t"); }),
                           {"bytes after token 1"}));
  std::string negative = bytes;
  const int32_t minus = -5;
  std::memcpy(negative.data() + 4 + 4, &minus, 4);
  EXPECT_TRUE(contains_all(error_of([&] { parse_llama2c_tokenizer(negative, 3, "t"); }),
                           {"token 0", "length -5", "byte offset 8"}));
  EXPECT_TRUE(
      contains_all(error_of([&] { parse_llama2c_tokenizer("ab", 3, "t"); }), {"too short"}));
}

TEST(LlamaWeights, ShapesThatDisagreeWithTheConfigNameTheTensor) {
  const GPTConfig c = llama_config(4, 2, false);
  const NamedTensors state = random_llama_state(c, 9);
  GPTConfig other = c;
  other.ffn_hidden = 32;
  EXPECT_TRUE(contains_all(error_of([&] { check_llama_state(state, other, "f"); }),
                           {"model.layers.0.mlp.gate_up_proj.weight", "[48, 16]", "[64, 16]"}));
  other = c;
  other.tie_embeddings = true;
  EXPECT_TRUE(contains_all(error_of([&] { check_llama_state(state, other, "f"); }),
                           {"lm_head.weight", "not a parameter"}));
  other = c;
  other.n_kv_head = 4;
  EXPECT_TRUE(contains_all(error_of([&] { check_llama_state(state, other, "f"); }),
                           {"qkv_proj.weight", "[32, 16]", "[48, 16]"}));
  NamedTensors missing(state.begin() + 1, state.end());
  EXPECT_TRUE(contains_all(error_of([&] { check_llama_state(missing, c, "f"); }),
                           {"no tensor 'model.embed_tokens.weight'"}));
  // A glass file whose metadata declares other sizes than its tensors.
  const std::string path = scratch_path("lying.safetensors");
  other = c;
  other.n_kv_head = 1;
  save_safetensors(path, state, {{"config", config_metadata(other)}});
  EXPECT_TRUE(contains_all(error_of([&] { load_gpt_weights(path); }), {"n_kv_head 2 vs 1"}));
  // A block size no model has (no position table bounds it by the file's bytes).
  other = c;
  other.block_size = int64_t{1} << 40;
  save_safetensors(path, state, {{"config", config_metadata(other)}});
  EXPECT_TRUE(contains_all(error_of([&] { load_gpt_weights(path); }),
                           {"block_size 1099511627776", "not a model's size"}));
  EXPECT_TRUE(
      contains_all(error_of([&] {
                     config_of_weights({{"transformer.wte.weight", zeros({11, 16})}}, c, "g");
                   }),
                   {"declares a llama", "GPT-2's", "model.embed_tokens.weight"}));
  // A llama saved as llm.c's GPT-2 file.
  EXPECT_TRUE(contains_all(
      error_of([&] { save_llama_weights(scratch_path("x.llmc"), WeightLayout::llmc, state, c); }),
      {"--save-format llmc", "holds a gpt2, not a llama"}));
  EXPECT_TRUE(contains_all(error_of([] { check_layout_holds(WeightLayout::llama2c, Arch::gpt2); }),
                           {"--save-format llama2c", "holds a llama, not a gpt2"}));
}

// Every prefix and many one-byte corruptions of a llama2.c file and a tokenizer.bin: each loads
// or is a glass::Error, never a crash (the sanitizers of make test watch the reads).
TEST(LlamaWeights, DamagedFilesAreErrorsNotCrashes) {
  const GPTConfig c = llama_config(2, 1, false);
  const std::string good = llama2c_weights_bytes(random_llama_state(c, 10), c);
  const std::string tok = llama2c_tokenizer_bytes({"x", "yz", "", "\n"});
  std::mt19937_64 gen(1);
  int errors = 0;
  auto attempt = [&](auto&& fn) {
    try {
      fn();
    } catch (const Error&) {
      ++errors;
    }
  };
  for (size_t n = 0; n < 64; ++n) attempt([&] { parse_llama2c_weights(good.substr(0, n), "p"); });
  for (size_t n = 0; n < tok.size(); ++n)
    attempt([&] { parse_llama2c_tokenizer(tok.substr(0, n), 4, "p"); });
  for (int i = 0; i < 300; ++i) {
    std::string bad = good, bad_tok = tok;
    const uint64_t r = gen();
    bad[r % 28] = static_cast<char>(r >> 40);
    bad_tok[r % bad_tok.size()] = static_cast<char>(r >> 40);
    attempt([&] { parse_llama2c_weights(bad, "p"); });
    attempt([&] { parse_llama2c_tokenizer(bad_tok, 4, "p"); });
  }
  EXPECT_GT(errors, 64 + static_cast<int>(tok.size()));
}

}  // namespace
}  // namespace glass
