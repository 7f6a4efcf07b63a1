#include "nn/gpt_config.h"

#include <cmath>
#include <limits>

#include "engine/error.h"

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
  GLASS_CHECK(arch == Arch::gpt2 || dropout == 0,
              "GPTConfig: dropout {} is gpt2's only (--arch llama has no dropout layers)", dropout);
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

GPTConfig GPTConfig::preset(const std::string& name) {
  if (name == "gpt2") return gpt2();
  if (name == "llama-tiny")
    return {.block_size = 128,
            .n_layer = 4,
            .n_head = 8,
            .n_embd = 256,
            .arch = Arch::llama,
            .n_kv_head = 4};
  if (name == "stories15m")
    return {.block_size = 256,
            .n_layer = 6,
            .n_head = 6,
            .n_embd = 288,
            .arch = Arch::llama,
            .n_kv_head = 6,
            .ffn_hidden = 768};
  fail("--model '{}' is not a preset (presets: {})", name, preset_names());
}

const char* GPTConfig::preset_names() { return "gpt2, llama-tiny, stories15m"; }

std::string GPTConfig::str() const {
  std::string s =
      fmt::format("vocab_size={} block_size={} n_layer={} n_head={} n_embd={} dropout={}",
                  vocab_size, block_size, n_layer, n_head, n_embd, dropout);
  if (padded_vocab_size) s += fmt::format(" padded_vocab_size={}", padded_vocab_size);
  if (arch == Arch::llama)
    s += fmt::format(
        " arch=llama n_kv_head={} ffn_hidden={} rope_theta={} norm_eps={} "
        "tie_embeddings={}",
        kv_heads(), ffn(), rope_theta, norm_eps, tie_embeddings ? 1 : 0);
  return s;
}

namespace {

// The parameter count in 128 bits (no configuration overflows it): every tensor of the model,
// with or without the position table (gpt2) and the input embedding (llama, when untied: a
// lookup, no multiply-adds).
using u128 = unsigned __int128;
u128 parameters(const GPTConfig& c, bool position_table, bool untied_input_embedding) {
  const auto C = static_cast<u128>(c.n_embd), V = static_cast<u128>(c.table_rows()),
             L = static_cast<u128>(c.n_layer);
  if (c.arch == Arch::gpt2) {
    // Per block: two LayerNorms (2C each), c_attn (3C*C + 3C), attn.c_proj (C*C + C),
    // c_fc (4C*C + 4C), mlp.c_proj (4C*C + C): 12 C^2 + 13 C. Then wte, wpe and ln_f.
    const u128 per_block = 12 * C * C + 13 * C;
    return V * C + (position_table ? static_cast<u128>(c.block_size) * C : 0) + L * per_block +
           2 * C;
  }
  // Per block: two RMSNorms (C each), qkv_proj ((H + 2 Hkv) D * C), o_proj (H D * C),
  // gate_up_proj (2F * C), down_proj (F * C). Then embed_tokens, norm and an untied lm_head.
  const auto HD = static_cast<u128>(c.n_head * c.head_dim()),
             KVD = static_cast<u128>(c.kv_heads() * c.head_dim()), F = static_cast<u128>(c.ffn());
  const u128 per_block = 2 * C + (HD + 2 * KVD) * C + HD * C + 3 * F * C;
  const u128 lm_head = c.tie_embeddings ? 0 : V * C;
  const u128 embed = c.tie_embeddings || untied_input_embedding ? V * C : 0;
  return embed + L * per_block + C + lm_head;
}

}  // namespace

int64_t gpt_num_parameters(const GPTConfig& c, bool include_position_embedding) {
  return static_cast<int64_t>(parameters(c, include_position_embedding, true));
}

int64_t flop_parameters(const GPTConfig& c) {
  return static_cast<int64_t>(parameters(c, false, false));
}

void check_state_dict_holds_model(const NamedTensors& state, const GPTConfig& config,
                                  const std::string& what) {
  const u128 model = parameters(config, true, true);
  u128 held = 0;
  for (const auto& [name, t] : state) held += static_cast<u128>(t.numel());
  GLASS_CHECK(held >= model,
              "{}: its shape ({}) is a model of {} parameters, but its tensors hold only {} "
              "elements: the file does not hold that model",
              what, config.str(),
              model > static_cast<u128>(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(model),
              static_cast<uint64_t>(held));
}

double gpt_flops_per_token(const GPTConfig& c, int64_t seq_len) {
  const double n = static_cast<double>(flop_parameters(c));
  return 6.0 * n + 12.0 * static_cast<double>(c.n_layer * seq_len * c.n_head * c.head_dim());
}

}  // namespace glass
