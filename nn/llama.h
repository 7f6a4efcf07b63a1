// Llama: the decoder-only transformer most toy models are today (llama2.c's TinyStories models,
// SmolLM, TinyLlama), with Hugging Face's LlamaForCausalLM names (q/k/v and gate/up fused: see
// nn/llama_layers.h):
//
//   ids [B, T] -> embed_tokens(ids) -> n_layer pre-RMSNorm LlamaBlocks -> norm
//   -> logits = x @ lm_head^T  [B, T, V]   (lm_head is embed_tokens' matrix when tied)
//
// No position table: positions enter as rotations of q and k (RoPE) inside each block.
// Parameters, in this order: model.embed_tokens.weight [V, C], model.layers.{i}.{
// input_layernorm.weight [C], self_attn.qkv_proj.weight [(H + 2 Hkv) D, C], self_attn.o_proj.weight
// [C, H D], post_attention_layernorm.weight [C], mlp.gate_up_proj.weight [2F, C],
// mlp.down_proj.weight [C, F]}, model.norm.weight [C], and lm_head.weight [V, C] when untied.
#pragma once

#include <memory>
#include <vector>

#include "nn/causal_lm.h"
#include "nn/llama_layers.h"

namespace glass {

// The module "model": the embedding, the blocks and the final norm (Hugging Face's LlamaModel).
class LlamaModel : public Module {
 public:
  explicit LlamaModel(const GPTConfig& config);

  Embedding embed_tokens;
  std::vector<std::unique_ptr<LlamaBlock>> layers;
  RMSNorm norm;
};

class Llama : public CausalLM {
 public:
  // Llama has no dropout: a config with dropout > 0 is refused by GPTConfig::validate.
  explicit Llama(const GPTConfig& config, Generator& dropout_gen = default_generator());

  // GPT-2's initialisation, which llama2.c also uses: every matrix N(0, 0.02^2), the residual
  // projections (o_proj, down_proj) N(0, (0.02/sqrt(2 n_layer))^2), the RMSNorm weights 1.
  void init(Generator& gen) override;
  void set_attention(AttentionKernel kernel) override;
  void set_recompute(Recompute mode) override;
  Tensor forward(const Tensor& ids) const override;
  const Tensor& token_embedding() const override { return model.embed_tokens.weight; }
  std::unique_ptr<Decoder> decoder() const override;

  // The LM head's matrix [V, C]: lm_head's, or embed_tokens' when tied (as read by forward).
  Tensor lm_head_weight() const;
  // normed [..., C] -> logits [..., V] through the LM head.
  Tensor logits(const Tensor& normed) const { return linear(normed, lm_head_weight()); }

  LlamaModel model;
  std::unique_ptr<Linear> lm_head;  // null when tied
  Recompute recompute = Recompute::none;
};

}  // namespace glass
