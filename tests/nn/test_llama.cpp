// Llama (nn/llama.h): Hugging Face's names with fused q/k/v and gate/up, the parameter count
// against the formula, the configuration's checks, GQA shapes, and the KV-cache decoder against the
// full forward (two different attention paths: the decoder's matmul/softmax over cached heads and
// the model's fused attention kernel).
#include <cmath>

#include "nn/llama.h"
#include "nn/llama_decoder.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// H = 4 query heads of D = 4 sharing Hkv = 2 key/value heads; F = 24.
const GPTConfig kTinyLlama{.vocab_size = 13,
                           .block_size = 10,
                           .n_layer = 2,
                           .n_head = 4,
                           .n_embd = 16,
                           .arch = Arch::llama,
                           .n_kv_head = 2,
                           .ffn_hidden = 24};

std::unique_ptr<Llama> make_llama(const GPTConfig& cfg, uint64_t seed) {
  auto m = std::make_unique<Llama>(cfg);
  Generator gen(seed);
  m->init(gen);
  return m;
}

TEST(Llama, ParameterNamesAndShapesAreHuggingFacesFused) {
  for (const bool tied : {true, false}) {
    GPTConfig c = kTinyLlama;
    c.tie_embeddings = tied;
    Llama m(c);
    const int64_t C = 16, F = 24, QKV = (4 + 2 * 2) * 4;
    std::vector<std::pair<std::string, Shape>> expected = {{"model.embed_tokens.weight", {13, C}}};
    for (int i = 0; i < 2; ++i) {
      const std::string l = "model.layers." + std::to_string(i) + ".";
      expected.push_back({l + "input_layernorm.weight", {C}});
      expected.push_back({l + "self_attn.qkv_proj.weight", {QKV, C}});
      expected.push_back({l + "self_attn.o_proj.weight", {C, C}});
      expected.push_back({l + "post_attention_layernorm.weight", {C}});
      expected.push_back({l + "mlp.gate_up_proj.weight", {2 * F, C}});
      expected.push_back({l + "mlp.down_proj.weight", {C, F}});
    }
    expected.push_back({"model.norm.weight", {C}});
    if (!tied) expected.push_back({"lm_head.weight", {13, C}});
    const NamedTensors params = m.named_parameters();
    ASSERT_EQ(params.size(), expected.size()) << "tied " << tied;
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_EQ(params[i].first, expected[i].first);
      EXPECT_EQ(params[i].second.shape(), expected[i].second) << params[i].first;
    }
    // The formula of nn/gpt_config.h counts what the module holds.
    EXPECT_EQ(m.num_parameters(), gpt_num_parameters(c)) << "tied " << tied;
    // FLOPs: the untied input embedding is a lookup, no multiply-adds.
    EXPECT_EQ(flop_parameters(c), m.num_parameters() - (tied ? 0 : 13 * C));
  }
}

TEST(Llama, FfnHiddenFollowsLlamasRounding) {
  EXPECT_EQ(GPTConfig::llama_ffn_hidden(256), 704);     // 682 -> a multiple of 64
  EXPECT_EQ(GPTConfig::llama_ffn_hidden(288), 768);     // llama2.c's stories15M
  EXPECT_EQ(GPTConfig::llama_ffn_hidden(768), 2048);    // 2048 -> a multiple of 256
  EXPECT_EQ(GPTConfig::llama_ffn_hidden(4096), 11008);  // Llama 7B's
  GPTConfig c = kTinyLlama;
  c.ffn_hidden = 0;
  EXPECT_EQ(c.ffn(), GPTConfig::llama_ffn_hidden(16));
}

TEST(Llama, ConfigurationErrorsNameTheFields) {
  auto bad = [](GPTConfig c) { return error_of([&] { Llama m(c); }); };
  GPTConfig c = kTinyLlama;
  c.n_kv_head = 3;
  EXPECT_TRUE(contains_all(bad(c), {"n_kv_head 3 must divide n_head 4"}));
  c = kTinyLlama;
  c.n_head = 16;  // D = 1: RoPE rotates pairs
  c.n_kv_head = 4;
  EXPECT_TRUE(contains_all(bad(c), {"RoPE needs an even head dim", "n_embd 16 / n_head 16 = 1"}));
  c = kTinyLlama;
  c.dropout = 0.1;
  EXPECT_TRUE(contains_all(bad(c), {"dropout 0.1 is gpt2's only"}));
  c = kTinyLlama;
  c.arch = Arch::gpt2;  // grouped-query attention is llama's
  EXPECT_TRUE(contains_all(error_of([&] { c.validate(); }),
                           {"n_kv_head 2 differs from n_head 4", "--arch llama"}));
  EXPECT_TRUE(contains_all(error_of([] { parse_arch("mistral"); }), {"mistral", "gpt2 or llama"}));
  EXPECT_TRUE(contains_all(error_of([] { GPTConfig::preset("llama-huge"); }),
                           {"llama-huge", "gpt2, llama-tiny, stories15m"}));
}

TEST(Llama, PresetsHaveTheirShapes) {
  const GPTConfig tiny = GPTConfig::preset("llama-tiny"), s15 = GPTConfig::preset("stories15m");
  EXPECT_EQ(tiny.arch, Arch::llama);
  EXPECT_LT(tiny.kv_heads(), tiny.n_head);  // the toy shows GQA
  EXPECT_EQ(tiny.ffn(), 704);
  EXPECT_EQ(s15.n_embd, 288);
  EXPECT_EQ(s15.n_layer, 6);
  EXPECT_EQ(s15.n_head, 6);
  EXPECT_EQ(s15.kv_heads(), 6);
  EXPECT_EQ(s15.ffn(), 768);
  EXPECT_EQ(s15.block_size, 256);
  // llama2.c's stories15M: 15.2M parameters with its 32000-token vocabulary, tied.
  GPTConfig s = s15;
  s.vocab_size = 32000;
  EXPECT_EQ(gpt_num_parameters(s), 15191712);
}

TEST(Llama, ForwardShapeAndEveryParameterGetsAGradient) {
  auto m = make_llama(kTinyLlama, 1);
  Generator gen(2);
  const Tensor ids = random_ids(2, 7, 13, gen), targets = random_ids(2, 7, 13, gen);
  const Tensor logits = m->forward(ids);
  EXPECT_EQ(logits.shape(), (Shape{2, 7, 13}));
  backward(m->loss(logits, targets));
  for (const auto& [name, p] : m->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    double sum = 0;
    for (const double v : to_vector<double>(cast(p.grad(), DType::f64))) sum += std::abs(v);
    EXPECT_GT(sum, 0) << name;
  }
  EXPECT_TRUE(contains_all(error_of([&] { m->forward(random_ids(1, 11, 13, gen)); }),
                           {"Llama::forward", "T=11", "block_size=10"}));
}

// Position matters (RoPE): the same tokens in another order give other logits at the last
// position, which a model without positions could not tell apart from bag-of-tokens.
TEST(Llama, RopeMakesOrderMatter) {
  auto m = make_llama(kTinyLlama, 3);
  NoGradGuard no_grad;
  const auto last = [&](std::vector<int32_t> ids) {
    const auto T = static_cast<int64_t>(ids.size());
    const std::vector<float> all = to_vector<float>(m->forward(from_vector(ids, {1, T})));
    return std::vector<float>(all.end() - 13, all.end());
  };
  const std::vector<float> a = last({1, 2, 3, 4}), b = last({2, 1, 3, 4});
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff += std::abs(a[i] - b[i]);
  EXPECT_GT(diff, 1e-4);
}

// The KV-cache decoder (cached rotated keys of Hkv heads, grouped query rows) gives the logits of
// the full causal forward at every position, on cpu and emu.
TEST(Llama, DecoderMatchesTheFullForward) {
  for (const Device device : {kCPU, Device::parse("emu")}) {
    auto m = make_llama(kTinyLlama, 4);
    m->to(device);
    m->eval();
    Generator gen(5);
    const Tensor ids = random_ids(1, 9, 13, gen);
    const std::vector<int32_t> tokens = to_vector<int32_t>(ids);
    std::vector<float> full;
    {
      NoGradGuard no_grad;
      full = to_vector<float>(m->forward(to_device(ids, device)));
    }
    const std::unique_ptr<Decoder> decoder = m->decoder();
    std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 3);
    std::vector<float> logits = decoder->prefill(prompt);
    for (size_t t = 2; t < tokens.size(); ++t) {
      if (t > 2) logits = decoder->step(tokens[t]);
      const std::vector<double> expected(full.begin() + static_cast<std::ptrdiff_t>(t * 13),
                                         full.begin() + static_cast<std::ptrdiff_t>((t + 1) * 13));
      EXPECT_TRUE(
          all_close(std::vector<double>(logits.begin(), logits.end()), expected, 1e-5, 1e-5))
          << device.str() << " position " << t;
    }
    EXPECT_EQ(decoder->pos(), 9);
  }
}

}  // namespace
}  // namespace glass
