// GPT: the GPT-2 / nanoGPT character model, with nanoGPT's parameter names so that weights move to
// and from PyTorch through safetensors.
//
//   ids [B, T] -> wte(ids) + wpe(0..T-1) -> dropout -> n_layer pre-LN Blocks -> ln_f
//   -> logits = x @ wte^T  [B, T, V]   (the LM head is tied to wte: no separate parameter)
//
// Parameters, in this order: transformer.wte.weight [V, C], transformer.wpe.weight [block_size, C],
// transformer.h.{i}.{ln_1.weight, ln_1.bias, attn.c_attn.weight [3C, C], attn.c_attn.bias,
// attn.c_proj.weight [C, C], attn.c_proj.bias, ln_2.weight, ln_2.bias, mlp.c_fc.weight [4C, C],
// mlp.c_fc.bias, mlp.c_proj.weight [C, 4C], mlp.c_proj.bias}, transformer.ln_f.weight/bias.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nn/causal_lm.h"
#include "nn/layers.h"

namespace glass {

class GPT : public CausalLM {
 public:
  // Dropout layers draw from `dropout_gen` (a checkpoint saves its state for bit-exact resume).
  explicit GPT(const GPTConfig& config, Generator& dropout_gen = default_generator());

  // nanoGPT's initialisation, drawn from `gen` in parameter order (deterministic for a seed):
  // Linear and Embedding weights N(0, 0.02^2), the residual projections (attn.c_proj and
  // mlp.c_proj weights) N(0, (0.02/sqrt(2 n_layer))^2), biases 0, LayerNorm weight 1 / bias 0.
  void init(Generator& gen) override;
  void set_attention(AttentionKernel kernel) override;
  void set_recompute(Recompute mode) override;
  Tensor forward(const Tensor& ids) const override;
  const Tensor& token_embedding() const override { return wte.weight; }
  std::unique_ptr<Decoder> decoder() const override;

  // The configuration a state dict's shapes imply: vocab_size and n_embd from wte, block_size
  // from wpe, n_layer from the transformer.h.{i} indices (which must be 0..n_layer-1). n_head
  // cannot be read from shapes and must be given.
  static GPTConfig config_from_state_dict(const NamedTensors& state, int64_t n_head);

  Embedding wte, wpe;
  Dropout drop;
  std::vector<std::unique_ptr<Block>> h;
  LayerNorm ln_f;
  Recompute recompute = Recompute::none;

 private:
  // The position ids 0..T-1 on a device, uploaded once per (device, T) and kept: no upload per
  // forward, and a CUDA graph that captured a forward reads ids that are still there.
  const Tensor& position_ids(int64_t T, Device device) const;
  mutable std::mutex positions_mu_;
  mutable std::map<std::string, Tensor> positions_;
};

}  // namespace glass
