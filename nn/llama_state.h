// glass's Llama state dict: the names and shapes of a llama GPT's parameters (GPTConfig with
// arch == Arch::llama), which every llama weight layout converts to and from, and the
// configuration those shapes imply.
//
//   model.embed_tokens.weight                          [Vp, C]
//   model.layers.{i}.input_layernorm.weight            [C]
//   model.layers.{i}.self_attn.qkv_proj.weight         [(H + 2 Hkv) D, C]  rows: q, k, v
//   model.layers.{i}.self_attn.o_proj.weight           [C, H D]
//   model.layers.{i}.post_attention_layernorm.weight   [C]
//   model.layers.{i}.mlp.gate_up_proj.weight           [2F, C]             rows: gate, up
//   model.layers.{i}.mlp.down_proj.weight              [C, F]
//   model.norm.weight                                  [C]
//   lm_head.weight                                     [Vp, C]  only when tie_embeddings is false
//
// Vp = table_rows(), H = n_head, Hkv = kv_heads(), D = C / H, F = ffn(). q and k rows are in
// Hugging Face's rotate-half order (RoPE pairs dimension j with j + D/2 of each head).
//
// What the shapes say: vocabulary rows, C, n_layer, F and tie (lm_head present or not); the
// number of heads only once H is known (then Hkv = (qkv rows / D - H) / 2). block_size is in no
// shape (RoPE has no position table): it comes from the file's metadata or the caller.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "nn/gpt.h"

namespace glass {

inline const std::string kLlamaEmbedding = "model.embed_tokens.weight";
inline const std::string kLlamaFinalNorm = "model.norm.weight";
inline const std::string kLlamaLmHead = "lm_head.weight";

// "model.layers.{layer}.{suffix}".
std::string llama_layer_name(int64_t layer, const char* suffix);

// Every parameter of a llama of `config` (n_head > 0), in glass's order: the embedding, each
// layer's seven, the final norm, then lm_head when untied.
std::vector<std::pair<std::string, Shape>> llama_parameter_shapes(const GPTConfig& config);

// True when a state dict in glass's names holds a llama (its embedding is model.embed_tokens).
bool is_llama_state(const NamedTensors& state);

// The tensor called `name`, or an error naming `what` (the file) and the missing tensor.
const Tensor& find_tensor(const NamedTensors& state, const std::string& name,
                          const std::string& what);

// The configuration a llama state dict's shapes imply: arch llama, vocab_size (the embedding's
// rows), n_embd, n_layer (the model.layers.{i} indices, 0..n_layer-1), ffn_hidden, tie_embeddings
// (lm_head absent); with n_head > 0 also n_kv_head from the qkv rows (an error when they are not
// (n_head + 2 Hkv) D for a Hkv dividing n_head). n_head 0 (not known) leaves n_head and n_kv_head
// 0; block_size is 0 and rope_theta and norm_eps are the defaults: the caller sets what the file
// says beside its tensors. Every tensor is checked against the shapes this implies (those that
// depend on H only when n_head is known) and a tensor that is not a llama parameter is refused:
// errors name `what` and the tensor.
GPTConfig llama_config_from_state_dict(const NamedTensors& state, int64_t n_head,
                                       const std::string& what);

// Refuses a state dict that is not exactly the parameters of a llama of `config` (n_head > 0):
// a missing tensor, one of another shape, or one more, named with `what`. Checked before a model
// of `config` is allocated, so a configuration that does not describe the tensors allocates
// nothing.
void check_llama_state(const NamedTensors& state, const GPTConfig& config, const std::string& what);

// The rows [begin, end) of a 2-D host tensor, as a new contiguous tensor.
Tensor row_range(const Tensor& t, int64_t begin, int64_t end);
// 2-D host tensors of one dtype and column count stacked by rows (torch.cat(dim=0)).
Tensor stack_rows(const std::vector<Tensor>& parts);

}  // namespace glass
