#include "nn/llama_layers.h"

#include "kernels/backend.h"

namespace glass {

RMSNorm::RMSNorm(int64_t dim, double eps) : eps(eps) {
  weight = register_parameter("weight", ones({dim}));
}

void RMSNorm::reset() {
  NoGradGuard no_grad;
  kernels::backend(weight).fill(weight, 1);
}

LlamaAttention::LlamaAttention(const GPTConfig& c)
    : n_head(c.n_head),
      n_kv_head(c.kv_heads()),
      rope_theta(c.rope_theta),
      qkv_proj(c.n_embd, (c.n_head + 2 * c.kv_heads()) * c.head_dim(), /*bias=*/false),
      o_proj(c.n_head * c.head_dim(), c.n_embd, /*bias=*/false) {
  register_module("qkv_proj", qkv_proj);
  register_module("o_proj", o_proj);
}

Tensor LlamaAttention::rotated_qkv(const Tensor& x, int64_t start_pos) const {
  return rotary_embedding(qkv_proj.forward(x), n_head, n_kv_head, rope_theta, start_pos);
}

Tensor LlamaAttention::forward(const Tensor& x) const {
  ModulePathScope in(path());
  GLASS_CHECK(x.dim() == 3 && x.size(2) == qkv_proj.weight.size(1),
              "LlamaAttention: input {} is not [B, T, {}]", x.describe(), qkv_proj.weight.size(1));
  // The attention kernel reads q, k and v in place from the rotated qkv and gives [B, T, H D].
  return o_proj.forward(causal_attention(rotated_qkv(x, 0), n_head, n_kv_head, attention));
}

LlamaMLP::LlamaMLP(int64_t n_embd, int64_t ffn_hidden)
    : gate_up_proj(n_embd, 2 * ffn_hidden, /*bias=*/false),
      down_proj(ffn_hidden, n_embd, /*bias=*/false) {
  register_module("gate_up_proj", gate_up_proj);
  register_module("down_proj", down_proj);
}

LlamaBlock::LlamaBlock(const GPTConfig& c)
    : input_layernorm(c.n_embd, c.norm_eps),
      self_attn(c),
      post_attention_layernorm(c.n_embd, c.norm_eps),
      mlp(c.n_embd, c.ffn()) {
  register_module("input_layernorm", input_layernorm);
  register_module("self_attn", self_attn);
  register_module("post_attention_layernorm", post_attention_layernorm);
  register_module("mlp", mlp);
}

ResidualNorm LlamaBlock::forward(const Tensor& x, const Tensor& x_normed,
                                 const RMSNorm& next_norm) const {
  ModulePathScope in(path());
  // h = x + self_attn(input_layernorm(x)), and post_attention_layernorm of it ...
  const ResidualNorm h = post_attention_layernorm.forward(x, self_attn.forward(x_normed));
  // ... then h + mlp(...), and next_norm of it (next_norm names its own module path).
  const Tensor m = recompute_mlp
                       ? checkpointed([this](const Tensor& x) { return mlp.forward(x); }, h.normed)
                       : mlp.forward(h.normed);
  return next_norm.forward(h.residual, m);
}

}  // namespace glass
