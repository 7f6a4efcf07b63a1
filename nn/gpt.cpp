#include "nn/gpt.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <set>

namespace glass {

const char* arch_name(Arch arch) { return arch == Arch::llama ? "llama" : "gpt2"; }

Arch parse_arch(const std::string& name) {
  if (name == "gpt2") return Arch::gpt2;
  if (name == "llama") return Arch::llama;
  fail("unknown architecture '{}': expected gpt2 or llama", name);
}

int64_t GPTConfig::llama_ffn_hidden(int64_t n_embd) {
  const int64_t hidden = 8 * n_embd / 3;
  const int64_t multiple = hidden >= 2048 ? 256 : 64;
  return (hidden + multiple - 1) / multiple * multiple;
}

void GPTConfig::validate() const {
  GLASS_CHECK(vocab_size > 0 && vocab_size <= std::numeric_limits<int32_t>::max(),
              "GPTConfig: vocab_size {} must be in [1, 2^31) (token ids are i32)", vocab_size);
  GLASS_CHECK(block_size > 0, "GPTConfig: block_size {} must be positive", block_size);
  GLASS_CHECK(n_layer > 0, "GPTConfig: n_layer {} must be positive", n_layer);
  GLASS_CHECK(n_head > 0, "GPTConfig: n_head {} must be positive", n_head);
  GLASS_CHECK(n_embd > 0, "GPTConfig: n_embd {} must be positive", n_embd);
  GLASS_CHECK(n_embd % n_head == 0, "GPTConfig: n_embd {} is not divisible by n_head {}", n_embd,
              n_head);
  GLASS_CHECK(dropout >= 0 && dropout < 1, "GPTConfig: dropout {} must be in [0, 1)", dropout);
  GLASS_CHECK(n_kv_head >= 0 && kv_heads() <= n_head && n_head % kv_heads() == 0,
              "GPTConfig: n_kv_head {} must divide n_head {} (grouped-query attention: each "
              "key/value head serves n_head / n_kv_head query heads)",
              n_kv_head, n_head);
  GLASS_CHECK(arch == Arch::llama || kv_heads() == n_head,
              "GPTConfig: n_kv_head {} differs from n_head {}, but grouped-query attention is "
              "llama's (--arch llama)",
              n_kv_head, n_head);
  GLASS_CHECK(arch == Arch::gpt2 || head_dim() % 2 == 0,
              "GPTConfig: RoPE needs an even head dim, but n_embd {} / n_head {} = {}", n_embd,
              n_head, head_dim());
  GLASS_CHECK(ffn_hidden >= 0, "GPTConfig: ffn_hidden {} must be positive (0: llama's default)",
              ffn_hidden);
  GLASS_CHECK(rope_theta > 0 && norm_eps > 0,
              "GPTConfig: rope_theta {} and norm_eps {} must be "
              "positive",
              rope_theta, norm_eps);
  GLASS_CHECK(padded_vocab_size == 0 || (padded_vocab_size >= vocab_size &&
                                         padded_vocab_size <= std::numeric_limits<int32_t>::max()),
              "GPTConfig: padded_vocab_size {} must be 0 (none) or in [vocab_size={}, 2^31)",
              padded_vocab_size, vocab_size);
}

GPTConfig GPTConfig::gpt2() {
  return {.vocab_size = 50257,
          .block_size = 1024,
          .n_layer = 12,
          .n_head = 12,
          .n_embd = 768,
          .dropout = 0,
          .padded_vocab_size = padded(50257)};
}

std::string GPTConfig::str() const {
  std::string s =
      fmt::format("vocab_size={} block_size={} n_layer={} n_head={} n_embd={} dropout={}",
                  vocab_size, block_size, n_layer, n_head, n_embd, dropout);
  if (padded_vocab_size) s += fmt::format(" padded_vocab_size={}", padded_vocab_size);
  if (arch == Arch::llama)
    s += fmt::format(" arch=llama n_kv_head={} ffn_hidden={} rope_theta={} norm_eps={} "
                     "tie_embeddings={}",
                     kv_heads(), ffn(), rope_theta, norm_eps, tie_embeddings ? 1 : 0);
  return s;
}

namespace {
// Validates before any member is built, so that a bad config gives its own error first.
const GPTConfig& validated(const GPTConfig& c) {
  c.validate();
  return c;
}
}  // namespace

GPT::GPT(const GPTConfig& cfg, Generator& dropout_gen)
    : config(validated(cfg)),
      wte(cfg.table_rows(), cfg.n_embd),
      wpe(cfg.block_size, cfg.n_embd),
      drop(cfg.dropout, dropout_gen),
      ln_f(cfg.n_embd) {
  register_module("transformer.wte", wte);
  register_module("transformer.wpe", wpe);
  register_module("transformer.drop", drop);
  for (int64_t i = 0; i < cfg.n_layer; ++i) {
    h.push_back(std::make_unique<Block>(cfg.n_embd, cfg.n_head, cfg.dropout, dropout_gen));
    register_module(fmt::format("transformer.h.{}", i), *h.back());
  }
  register_module("transformer.ln_f", ln_f);
}

void GPT::init(Generator& gen) {
  const double std = 0.02;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  wte.reset(gen, std);
  wpe.reset(gen, std);
  for (auto& block : h) {
    block->ln_1.reset();
    block->attn.c_attn.reset(gen, std);
    block->attn.c_proj.reset(gen, proj_std);
    block->ln_2.reset();
    block->mlp.c_fc.reset(gen, std);
    block->mlp.c_proj.reset(gen, proj_std);
  }
  ln_f.reset();
}

void GPT::set_attention(AttentionKernel kernel) {
  for (auto& block : h) block->attn.attention = kernel;
}

const Tensor& GPT::position_ids(int64_t T, Device device) const {
  std::lock_guard lock(positions_mu_);
  Tensor& ids = positions_[fmt::format("{}/{}", device.str(), T)];
  if (!ids.defined()) {
    std::vector<int32_t> positions(static_cast<size_t>(T));
    std::iota(positions.begin(), positions.end(), 0);
    ids = from_vector(positions, {T}, device);
  }
  return ids;
}

Tensor GPT::forward(const Tensor& ids) const {
  ModulePathScope in(path());
  GLASS_CHECK(ids.defined() && ids.dtype() == DType::i32 && ids.dim() == 2,
              "GPT::forward: token ids must be i32 [B, T], got {}", ids.describe());
  const int64_t T = ids.size(1);
  GLASS_CHECK(T >= 1 && T <= config.block_size,
              "GPT::forward: sequence length T={} must be in [1, block_size={}] (ids {})", T,
              config.block_size, ids.describe());
  // Token embeddings [B, T, C] plus position embeddings [T, C], broadcast over the batch.
  Tensor x = wte.forward(ids) + wpe.forward(position_ids(T, ids.device()));
  x = drop.forward(x);
  // The residual stream through the blocks. Each residual add runs fused with the LayerNorm that
  // reads its sum (residual_layer_norm): block i's last add with block i+1's ln_1, the last
  // block's with ln_f. Only the first ln_1 has no add before it.
  ResidualNorm stream{x, h.front()->ln_1.forward(x)};
  for (size_t i = 0; i < h.size(); ++i) {
    const LayerNorm& next_ln = i + 1 < h.size() ? h[i + 1]->ln_1 : ln_f;
    stream = h[i]->forward(stream.residual, stream.normed, next_ln);
  }
  // Tied LM head: logits = ln_f(x) @ wte^T, no bias.
  return linear(stream.normed, wte.param(wte.weight));
}

Tensor GPT::loss(const Tensor& logits, const Tensor& targets) const {
  const int64_t rows = targets.numel(), columns = config.table_rows();
  GLASS_CHECK(logits.dim() >= 1 && logits.size(-1) == columns && logits.numel() == rows * columns,
              "GPT::loss: logits {} must hold one row of {} logits per target of {}",
              logits.describe(), columns, targets.describe());
  const Tensor flat = view(logits, {rows, columns}), flat_targets = view(targets, {rows});
  // emu and cuda (and meta, which plans their launches): the fused classifier, in f32 or bf16
  // (the loss in f32 either way).
  if (runs_cuda_kernels(logits.device()))
    return fused_classifier(flat, flat_targets, config.vocab_size);
  // The reference path: softmax over the class columns only.
  const Tensor classes = columns == config.vocab_size ? flat : slice(flat, 1, 0, config.vocab_size);
  return cross_entropy(classes, flat_targets);
}

GPTConfig GPT::config_from_state_dict(const NamedTensors& state, int64_t n_head) {
  auto find = [&](const std::string& name) -> const Tensor& {
    for (const auto& [n, t] : state)
      if (n == name) return t;
    fail("GPT::config_from_state_dict: the state dict has no '{}'", name);
  };
  const Tensor& wte = find("transformer.wte.weight");
  const Tensor& wpe = find("transformer.wpe.weight");
  GLASS_CHECK(wte.dim() == 2 && wpe.dim() == 2 && wte.size(1) == wpe.size(1),
              "GPT::config_from_state_dict: wte {} and wpe {} must be [V, C] and [block_size, C]",
              wte.describe(), wpe.describe());
  // Layer indices from names "transformer.h.<i>.<rest>".
  const std::string prefix = "transformer.h.";
  std::set<int64_t> layers;
  for (const auto& [name, t] : state) {
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    const std::string index = name.substr(prefix.size(), dot - prefix.size());
    GLASS_CHECK(!index.empty() && index.size() < 10 &&
                    index.find_first_not_of("0123456789") == std::string::npos,
                "GPT::config_from_state_dict: bad layer index in '{}'", name);
    layers.insert(std::stoll(index));
  }
  const int64_t n_layer = static_cast<int64_t>(layers.size());
  GLASS_CHECK(n_layer > 0 && *layers.rbegin() == n_layer - 1,
              "GPT::config_from_state_dict: layer indices must be 0..n_layer-1, found [{}]",
              fmt::join(layers, ", "));
  GPTConfig c{.vocab_size = wte.size(0),
              .block_size = wpe.size(0),
              .n_layer = n_layer,
              .n_head = n_head,
              .n_embd = wte.size(1)};
  c.validate();
  return c;
}

int64_t gpt_num_parameters(const GPTConfig& c, bool include_position_embedding) {
  const int64_t C = c.n_embd;
  // Per block: two LayerNorms (2C each), c_attn (3C*C + 3C), attn.c_proj (C*C + C),
  // c_fc (4C*C + 4C), mlp.c_proj (4C*C + C): 12 C^2 + 13 C.
  const int64_t per_block = 12 * C * C + 13 * C;
  const int64_t wpe = c.block_size * C;
  return c.table_rows() * C + (include_position_embedding ? wpe : 0) + c.n_layer * per_block +
         2 * C;
}

void check_state_dict_holds_model(const NamedTensors& state, const GPTConfig& config,
                                  const std::string& what) {
  using u128 = unsigned __int128;
  // The same count as gpt_num_parameters, without its int64 products.
  const auto C = static_cast<u128>(config.n_embd);
  const u128 per_block = 12 * C * C + 13 * C;
  const u128 model = static_cast<u128>(config.table_rows()) * C +
                     static_cast<u128>(config.block_size) * C +
                     static_cast<u128>(config.n_layer) * per_block + 2 * C;
  u128 held = 0;
  for (const auto& [name, t] : state) held += static_cast<u128>(t.numel());
  GLASS_CHECK(held >= model,
              "{}: its shape ({}) is a GPT of {} parameters, but its tensors hold only {} "
              "elements: the file does not hold that model",
              what, config.str(),
              model > static_cast<u128>(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(model),
              static_cast<uint64_t>(held));
}

double gpt_flops_per_token(const GPTConfig& c, int64_t seq_len) {
  const double n = static_cast<double>(gpt_num_parameters(c, false));
  return 6.0 * n + 12.0 * static_cast<double>(c.n_layer * seq_len * c.n_embd);
}

}  // namespace glass
