// Hugging Face's GPT-2 layout (transformers' GPT2Model / GPT2LMHeadModel state dicts, as in the
// model.safetensors files of the Hub), converted to and from glass's state dict.
//
//   Hugging Face                              glass
//   [transformer.]wte.weight [V, C]           transformer.wte.weight [V or Vp, C]
//   [transformer.]wpe.weight, ln_f.*          transformer.wpe.weight, transformer.ln_f.*
//   [transformer.]h.N.attn.c_attn.weight      transformer.h.N.attn.c_attn.weight [3C, C]
//       Conv1D: [in, out] = [C, 3C]           (nn.Linear: [out, in]; the same for c_proj, c_fc,
//                                              mlp.c_proj: each Conv1D weight is transposed)
//   [transformer.]h.N.attn.bias, .masked_bias the causal mask buffers: skipped
//   lm_head.weight                            tied to wte: skipped (must equal wte)
#pragma once

#include "nn/gpt_weights.h"

namespace glass {

// True when a state dict read from safetensors is in Hugging Face's layout: names without the
// "transformer." prefix, or a c_attn weight stored [C, 3C].
bool looks_like_hf(const NamedTensors& state);

// Hugging Face's tensors (host) -> glass's names and orientation. Errors name `path` and the
// tensor at fault (an unknown name, a Conv1D weight that is not 2-D, an untied lm_head).
NamedTensors hf_to_glass(const NamedTensors& hf, const std::string& path);

// The model's weights in Hugging Face's layout (names without the prefix, as on the Hub), on the
// host; wte with vocab_size rows (Hugging Face's GPT-2 has no padded rows).
NamedTensors glass_to_hf(const CausalLM& model);

}  // namespace glass
