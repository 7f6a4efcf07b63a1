#include "nn/gpt.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "nn/gpt_decoder.h"

namespace glass {

GPT::GPT(const GPTConfig& cfg, Generator& dropout_gen)
    : CausalLM(cfg),
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

std::unique_ptr<Decoder> GPT::decoder() const { return std::make_unique<GPTDecoder>(*this); }

void GPT::set_attention(AttentionKernel kernel) {
  for (auto& block : h) block->attn.attention = kernel;
}

void GPT::set_recompute(Recompute mode) {
  recompute = mode;
  for (auto& block : h) {
    block->recompute_mlp = mode == Recompute::mlp;
    block->mlp.recompute_gelu = mode == Recompute::gelu;
  }
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
  check_ids(ids, "GPT::forward");
  const int64_t T = ids.size(1);
  // Token embeddings [B, T, C] plus position embeddings [T, C], broadcast over the batch.
  Tensor x = wte.forward(ids) + wpe.forward(position_ids(T, ids.device()));
  x = drop.forward(x);
  // The residual stream through the blocks. Each residual add runs fused with the LayerNorm that
  // reads its sum (residual_layer_norm): block i's last add with block i+1's ln_1, the last
  // block's with ln_f. Only the first ln_1 has no add before it.
  ResidualNorm stream{x, h.front()->ln_1.forward(x)};
  for (size_t i = 0; i < h.size(); ++i) {
    const LayerNorm& next_ln = i + 1 < h.size() ? h[i + 1]->ln_1 : ln_f;
    const Block& block = *h[i];
    if (recompute == Recompute::block)  // keeps the block's input, re-runs it in backward
      stream = checkpointed(
          [&block, &next_ln](const ResidualNorm& in) {
            return block.forward(in.residual, in.normed, next_ln);
          },
          stream, {&drop.generator()});
    else
      stream = block.forward(stream.residual, stream.normed, next_ln);
  }
  // Tied LM head: logits = ln_f(x) @ wte^T, no bias.
  return linear(stream.normed, wte.param(wte.weight));
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

}  // namespace glass
