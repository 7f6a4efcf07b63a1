#include "nn/llama.h"

#include <cmath>

#include "nn/llama_decoder.h"

namespace glass {

LlamaModel::LlamaModel(const GPTConfig& c)
    : embed_tokens(c.table_rows(), c.n_embd), norm(c.n_embd, c.norm_eps) {
  register_module("embed_tokens", embed_tokens);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    layers.push_back(std::make_unique<LlamaBlock>(c));
    register_module(fmt::format("layers.{}", i), *layers.back());
  }
  register_module("norm", norm);
}

Llama::Llama(const GPTConfig& c, Generator& /*dropout_gen*/) : CausalLM(c), model(c) {
  register_module("model", model);
  if (!c.tie_embeddings) {
    lm_head = std::make_unique<Linear>(c.n_embd, c.table_rows(), /*bias=*/false);
    register_module("lm_head", *lm_head);
  }
}

void Llama::init(Generator& gen) {
  const double std = 0.02;
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  model.embed_tokens.reset(gen, std);
  for (auto& block : model.layers) {
    block->input_layernorm.reset();
    block->self_attn.qkv_proj.reset(gen, std);
    block->self_attn.o_proj.reset(gen, proj_std);
    block->post_attention_layernorm.reset();
    block->mlp.gate_up_proj.reset(gen, std);
    block->mlp.down_proj.reset(gen, proj_std);
  }
  model.norm.reset();
  if (lm_head) lm_head->reset(gen, std);
}

void Llama::set_attention(AttentionKernel kernel) {
  for (auto& block : model.layers) block->self_attn.attention = kernel;
}

Tensor Llama::lm_head_weight() const {
  return lm_head ? lm_head->param(lm_head->weight)
                 : model.embed_tokens.param(model.embed_tokens.weight);
}

std::unique_ptr<Decoder> Llama::decoder() const { return std::make_unique<LlamaDecoder>(*this); }

void Llama::set_recompute(Recompute mode) {
  recompute = mode;
  for (auto& layer : model.layers) {
    layer->recompute_mlp = mode == Recompute::mlp;
    layer->mlp.recompute_swiglu = mode == Recompute::gelu;
  }
}

Tensor Llama::forward(const Tensor& ids) const {
  ModulePathScope in(path());
  check_ids(ids, "Llama::forward");
  const Tensor x = model.embed_tokens.forward(ids);
  // The residual stream through the blocks, each add fused with the RMSNorm that reads its sum:
  // block i's last add with block i+1's input_layernorm, the last block's with the final norm.
  const auto& layers = model.layers;
  ResidualNorm stream{x, layers.front()->input_layernorm.forward(x)};
  for (size_t i = 0; i < layers.size(); ++i) {
    const RMSNorm& next = i + 1 < layers.size() ? layers[i + 1]->input_layernorm : model.norm;
    const LlamaBlock& block = *layers[i];
    if (recompute == Recompute::block)  // keeps the block's input, re-runs it in backward
      stream = checkpointed(
          [&block, &next](const ResidualNorm& in) {
            return block.forward(in.residual, in.normed, next);
          },
          stream);
    else
      stream = block.forward(stream.residual, stream.normed, next);
  }
  return logits(stream.normed);
}

}  // namespace glass
