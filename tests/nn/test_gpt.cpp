// GPT: nanoGPT's parameter names and shapes, the tied head, init, forward checks, and state dicts
// through safetensors.
#include <cmath>

#include "nn/gpt.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

const GPTConfig kTiny{.vocab_size = 11, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 8};

std::unique_ptr<GPT> make_gpt(const GPTConfig& cfg, uint64_t seed) {
  auto m = std::make_unique<GPT>(cfg);
  Generator gen(seed);
  m->init(gen);
  return m;
}

TEST(GPT, ParameterNamesAndShapesAreNanoGPTs) {
  GPT m(kTiny);
  const int64_t C = 8;
  std::vector<std::pair<std::string, Shape>> expected = {{"transformer.wte.weight", {11, C}},
                                                         {"transformer.wpe.weight", {8, C}}};
  for (int i = 0; i < 2; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".";
    for (auto& [name, shape] :
         std::vector<std::pair<std::string, Shape>>{{"ln_1.weight", {C}},
                                                    {"ln_1.bias", {C}},
                                                    {"attn.c_attn.weight", {3 * C, C}},
                                                    {"attn.c_attn.bias", {3 * C}},
                                                    {"attn.c_proj.weight", {C, C}},
                                                    {"attn.c_proj.bias", {C}},
                                                    {"ln_2.weight", {C}},
                                                    {"ln_2.bias", {C}},
                                                    {"mlp.c_fc.weight", {4 * C, C}},
                                                    {"mlp.c_fc.bias", {4 * C}},
                                                    {"mlp.c_proj.weight", {C, 4 * C}},
                                                    {"mlp.c_proj.bias", {C}}})
      expected.emplace_back(h + name, shape);
  }
  expected.push_back({"transformer.ln_f.weight", {C}});
  expected.push_back({"transformer.ln_f.bias", {C}});
  const NamedTensors params = m.named_parameters();
  ASSERT_EQ(params.size(), expected.size());  // no separate lm_head parameter
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].first, expected[i].first);
    EXPECT_EQ(params[i].second.shape(), expected[i].second) << params[i].first;
    EXPECT_EQ(params[i].second.autograd_meta().name, expected[i].first);
  }
}

TEST(GPT, ParameterCountAndFlopsFormula) {
  GPT m(kTiny);
  EXPECT_EQ(m.num_parameters(), gpt_num_parameters(kTiny));
  const int64_t n = gpt_num_parameters(kTiny, false);
  EXPECT_EQ(n, m.num_parameters() - 8 * 8);  // without wpe
  EXPECT_DOUBLE_EQ(gpt_flops_per_token(kTiny, 5), 6.0 * n + 12.0 * 2 * 5 * 8);
}

TEST(GPT, ConfigValidation) {
  auto bad = [](GPTConfig c) { return error_of([&] { GPT m(c); }); };
  GPTConfig c = kTiny;
  c.n_head = 3;
  EXPECT_TRUE(contains_all(bad(c), {"n_embd 8 is not divisible by n_head 3"}));
  c = kTiny;
  c.vocab_size = 0;
  EXPECT_TRUE(contains_all(bad(c), {"vocab_size 0"}));
  c = kTiny;
  c.dropout = 1.0;
  EXPECT_TRUE(contains_all(bad(c), {"dropout 1 must be in [0, 1)"}));
}

TEST(GPT, ForwardShapeAndInputErrors) {
  auto m = make_gpt(kTiny, 1);
  Generator gen(2);
  EXPECT_EQ(m->forward(random_ids(3, 5, 11, gen)).shape(), (Shape{3, 5, 11}));
  EXPECT_EQ(m->forward(random_ids(1, 8, 11, gen)).shape(), (Shape{1, 8, 11}));
  EXPECT_TRUE(contains_all(error_of([&] { m->forward(random_ids(2, 9, 11, gen)); }),
                           {"T=9", "block_size=8"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             m->forward(zeros({2, 4}));
                           }),
                           {"i32 [B, T]", "f32[2, 4]"}));
  EXPECT_TRUE(contains_all(error_of([&] { m->forward(zeros({8}, DType::i32)); }), {"i32[8]"}));
}

TEST(GPT, InitIsDeterministicAndFollowsNanoGPT) {
  const GPTConfig cfg{.vocab_size = 65, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32};
  auto a = make_gpt(cfg, 42), b = make_gpt(cfg, 42), c = make_gpt(cfg, 43);
  const NamedTensors pa = a->named_parameters(), pb = b->named_parameters(),
                     pc = c->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(to_vector<float>(pa[i].second), to_vector<float>(pb[i].second)) << pa[i].first;
  EXPECT_NE(to_vector<float>(pa[0].second), to_vector<float>(pc[0].second));
  auto std_of = [](const Tensor& t) {
    double s = 0;
    const std::vector<double> v = values(t);
    for (double x : v) s += x * x;
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  const double proj_std = 0.02 / std::sqrt(4.0);
  for (const auto& [name, p] : pa) {
    const std::vector<double> v = values(p);
    if (name.find(".ln_") != std::string::npos || name.starts_with("transformer.ln_f"))
      EXPECT_EQ(v, std::vector<double>(v.size(), name.ends_with("weight") ? 1.0 : 0.0)) << name;
    else if (name.ends_with(".bias"))
      EXPECT_EQ(v, std::vector<double>(v.size(), 0.0)) << name;
    else  // 1024 or more draws: the sample std is within a few percent
      EXPECT_NEAR(std_of(p), name.ends_with("c_proj.weight") ? proj_std : 0.02,
                  0.1 * (name.ends_with("c_proj.weight") ? proj_std : 0.02))
          << name;
  }
}

TEST(GPT, TiedHeadGradientSumsEmbeddingAndHeadContributions) {
  auto m = make_gpt(kTiny, 3);
  Generator gen(4);
  const Tensor ids = random_ids(2, 6, 11, gen), targets = random_ids(2, 6, 11, gen);
  const Tensor logits = m->forward(ids);
  backward(cross_entropy(logits, targets));
  const std::vector<double> tied = values(m->wte.weight.grad());

  // The same model written out by hand, with the head as a separate copy of wte: the tied
  // gradient must be the embedding's gradient plus the head's.
  for (Tensor p : m->parameters()) p.set_grad(Tensor());
  Tensor head = cast(m->wte.weight, DType::f32);
  head.set_requires_grad(true);
  Tensor x = m->wte.forward(ids) + m->wpe.forward(from_vector<int32_t>({0, 1, 2, 3, 4, 5}, {6}));
  for (const auto& block : m->h) x = block->forward(x);
  const Tensor separate_logits = linear(m->ln_f.forward(x), head);
  EXPECT_TRUE(all_close(separate_logits, logits, 1e-6));
  backward(cross_entropy(separate_logits, targets));
  std::vector<double> sum = values(m->wte.weight.grad());
  const std::vector<double> from_head = values(head.grad());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += from_head[i];
  EXPECT_TRUE(all_close(tied, sum, 1e-5));
  // Both parts matter: neither alone is the tied gradient.
  EXPECT_FALSE(all_close(tied, from_head, 1e-3));
}

TEST(GPT, AttentionDropoutPathMatchesFusedAttentionWithoutDropout) {
  Generator gen(5);
  std::vector<Tensor> qkv;
  for (int i = 0; i < 3; ++i) {
    qkv.push_back(rnd({2, 3, 7, 4}, gen));
    qkv.back().set_requires_grad(true);
  }
  const Tensor r = rnd({2, 3, 7, 4}, gen);
  auto grads_of = [&](const Tensor& y) {
    for (Tensor& t : qkv) t.set_grad(Tensor());
    backward(sum(y * r));
    std::vector<double> g;
    for (Tensor& t : qkv)
      for (double v : values(t.grad())) g.push_back(v);
    return g;
  };
  const Tensor fused = causal_attention(qkv[0], qkv[1], qkv[2]);
  const Tensor unfused = causal_attention_dropout(qkv[0], qkv[1], qkv[2], 0.0, gen);
  EXPECT_TRUE(all_close(unfused, fused, 1e-12));
  EXPECT_TRUE(all_close(grads_of(unfused), grads_of(fused), 1e-12));
}

TEST(GPT, AttentionDropoutPathPassesGradcheck) {
  Generator gen(10);
  std::vector<Tensor> qkv;
  for (int i = 0; i < 3; ++i) qkv.push_back(rnd({1, 2, 5, 3}, gen));
  // A fresh generator per call: every evaluation drops the same elements.
  EXPECT_TRUE(gradcheck_passes(
      [](const std::vector<Tensor>& in) {
        Generator mask_gen(11);
        return causal_attention_dropout(in[0], in[1], in[2], 0.3, mask_gen);
      },
      qkv));
}

TEST(GPT, DropoutActsOnlyInTraining) {
  GPTConfig cfg = kTiny;
  cfg.dropout = 0.5;
  auto m = make_gpt(cfg, 6);
  Generator gen(7);
  const Tensor ids = random_ids(2, 8, 11, gen);
  m->eval();
  const std::vector<float> a = to_vector<float>(m->forward(ids));
  EXPECT_EQ(to_vector<float>(m->forward(ids)), a);
  m->train();
  EXPECT_NE(to_vector<float>(m->forward(ids)), a);
}

TEST(GPT, ConfigFromStateDict) {
  GPT m(kTiny);
  const GPTConfig c = GPT::config_from_state_dict(m.state_dict(), 2);
  EXPECT_EQ(c.str(), kTiny.str());
  NamedTensors state = m.state_dict();
  std::erase_if(state, [](const auto& p) { return p.first.starts_with("transformer.h.0."); });
  EXPECT_TRUE(contains_all(error_of([&] { GPT::config_from_state_dict(state, 2); }),
                           {"0..n_layer-1", "[1]"}));
  EXPECT_TRUE(contains_all(error_of([&] { GPT::config_from_state_dict(m.state_dict(), 3); }),
                           {"not divisible by n_head 3"}));
  EXPECT_TRUE(contains_all(error_of([] { GPT::config_from_state_dict({}, 2); }),
                           {"no 'transformer.wte.weight'"}));
}

TEST(GPT, StateDictRoundTripsThroughSafetensorsInF32AndBF16) {
  auto src = make_gpt(kTiny, 8);
  const std::string f32_path = scratch_path("gpt_f32.safetensors");
  const std::string bf16_path = scratch_path("gpt_bf16.safetensors");
  save_safetensors(f32_path, src->state_dict(), {{"n_head", "2"}});
  NamedTensors as_bf16;
  for (const auto& [name, p] : src->state_dict()) as_bf16.emplace_back(name, cast(p, DType::bf16));
  save_safetensors(bf16_path, as_bf16);

  // F32: bit-exact, so the forward pass is too.
  const SafeTensorsFile f32_file = load_safetensors(f32_path);
  GPT f32_model(
      GPT::config_from_state_dict(f32_file.tensors, std::stoi(f32_file.metadata.at("n_head"))));
  f32_model.load_state_dict(f32_file.tensors);
  Generator gen(9);
  const Tensor ids = random_ids(2, 8, 11, gen);
  EXPECT_EQ(to_vector<float>(f32_model.forward(ids)), to_vector<float>(src->forward(ids)));

  // BF16: every value within bf16 rounding (8 significant bits, round to nearest: at most half a
  // unit in the 8th bit, which is at most 2^-8 relative).
  GPT bf16_model(kTiny);
  bf16_model.load_state_dict(load_safetensors(bf16_path).tensors);
  const NamedTensors want = src->state_dict(), got = bf16_model.state_dict();
  for (size_t i = 0; i < want.size(); ++i) {
    const std::vector<double> w = values(want[i].second), g = values(got[i].second);
    for (size_t j = 0; j < w.size(); ++j)
      ASSERT_LE(std::abs(g[j] - w[j]), std::ldexp(std::abs(w[j]), -8))
          << want[i].first << "[" << j << "]";
  }
}

TEST(GPT, LoadingWeightsOfAnotherShapeNamesBothShapes) {
  GPTConfig wider = kTiny;
  wider.vocab_size = 13;
  GPT other(wider), m(kTiny);
  EXPECT_TRUE(contains_all(error_of([&] { m.load_state_dict(other.state_dict()); }),
                           {"'transformer.wte.weight' is f32[13, 8] on cpu in the state dict but "
                            "f32[11, 8] on cpu in the model"}));
}

}  // namespace
}  // namespace glass
