// Hugging Face's Llama layout (transformers' LlamaForCausalLM state dict, as in the
// model.safetensors of TinyLlama, SmolLM and the like) with its config.json, converted to and from
// glass's llama state dict (nn/llama_state.h).
//
//   Hugging Face                                      glass
//   model.embed_tokens.weight [V, C]                  model.embed_tokens.weight [Vp, C]
//   model.layers.N.self_attn.{q,k,v}_proj.weight      model.layers.N.self_attn.qkv_proj.weight
//       [H D, C], [Hkv D, C], [Hkv D, C]                  [(H + 2 Hkv) D, C]: q, k, v stacked
//   model.layers.N.mlp.{gate,up}_proj.weight [F, C]   model.layers.N.mlp.gate_up_proj.weight [2F,
//   C] o_proj, down_proj, the norms, model.norm          the same names and shapes lm_head.weight
//   (absent when tied)                 lm_head.weight (absent when tied)
//   model.layers.N.self_attn.rotary_emb.inv_freq      a buffer some versions save: skipped
//
// Both use rotate-half RoPE, so q and k rows are copied as they are. The shape is in config.json
// (hidden_size, intermediate_size, num_attention_heads, num_key_value_heads, num_hidden_layers,
// vocab_size, rms_norm_eps, rope_theta, max_position_embeddings, tie_word_embeddings; model_type
// "llama"): read from beside the weights when it is there, written beside them by --save-format hf.
// GPT-2's Hugging Face files (nn/hf_weights.h) are told apart by names.
#pragma once

#include <optional>
#include <string>

#include "nn/gpt_weights.h"

namespace glass {

// True when safetensors tensors are Hugging Face's llama: model.embed_tokens and q_proj weights.
bool looks_like_hf_llama(const NamedTensors& tensors);

// Hugging Face's tensors (host) -> glass's llama state dict. Every layer 0..L-1 must have its nine
// tensors: errors name `path` and the tensor that is missing, unknown or of a shape that does not
// stack (q, k, v and gate, up must have n_embd columns; gate and up the same rows).
NamedTensors hf_llama_to_glass(const NamedTensors& hf, const std::string& path);

// glass's llama state dict (any device) -> Hugging Face's tensors on the host, embed_tokens and
// lm_head with vocab_size rows (no padding rows). `config` gives the q/k/v and gate/up splits.
NamedTensors glass_to_hf_llama(const NamedTensors& state, const GPTConfig& config);

// config.json for `config` (LlamaForCausalLM's fields), and back: a missing field, a field of the
// wrong type, a model_type other than "llama", or a feature glass's llama lacks (attention or MLP
// biases, rope_scaling, a head_dim other than hidden_size / num_attention_heads) is an error naming
// `what` and the field. block_size is max_position_embeddings.
std::string hf_llama_config_json(const GPTConfig& config);
GPTConfig parse_hf_llama_config(const std::string& text, const std::string& what);

// The config.json beside `weights_path` (same directory), if there is one.
std::string hf_config_path(const std::string& weights_path);
std::optional<GPTConfig> read_hf_llama_config_beside(const std::string& weights_path);

// Refuses a config.json that disagrees with Hugging Face tensors: each field against the tensor
// that holds it (hidden_size vs embed_tokens' columns, vocab_size vs its rows, intermediate_size vs
// gate_proj's rows, num_hidden_layers vs the layers, num_attention_heads and num_key_value_heads
// vs q_proj's and k_proj's rows, tie_word_embeddings vs lm_head's presence), naming the field and
// both values.
void check_hf_llama_config(const NamedTensors& hf, const GPTConfig& config,
                           const std::string& what);

}  // namespace glass
