// GPTConfig: the shape of a model, for every architecture glass trains (nn/causal_lm.h), and
// what follows from the shape alone: the parameter count and the training FLOPs per token.
#pragma once

#include <cstdint>
#include <string>

#include "nn/safetensors.h"

namespace glass {

// The architecture a GPTConfig describes (train_gpt --arch):
//   gpt2   learned positions, pre-LayerNorm blocks with biases, GELU MLP of 4C (nn/layers.h)
//   llama  RoPE, pre-RMSNorm blocks without biases, SwiGLU MLP of ffn_hidden, grouped-query
//          attention with n_kv_head key/value heads (nn/llama_layers.h)
enum class Arch : uint8_t { gpt2, llama };
const char* arch_name(Arch arch);          // "gpt2" | "llama"
Arch parse_arch(const std::string& name);  // or an error naming the valid ones

struct GPTConfig {
  int64_t vocab_size = 0;  // classes: token ids are in [0, vocab_size)
  int64_t block_size = 0;  // the longest sequence: rows of wpe
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_embd = 0;
  double dropout = 0;
  // Rows of wte (and columns of the logits), >= vocab_size; 0 = vocab_size. GPT-2 pads 50257 to
  // 50304, a multiple of 64, as llm.c does, so that the LM head's GEMM and the classifier's rows
  // are aligned. The padded rows are never looked up, get no probability and no gradient from
  // the loss (AdamW's weight decay still shrinks them).
  int64_t padded_vocab_size = 0;
  Arch arch = Arch::gpt2;
  // llama only (gpt2 has n_kv_head = n_head, 4C, LayerNorm eps 1e-5, tied embeddings):
  int64_t n_kv_head = 0;       // key/value heads, dividing n_head; 0 = n_head
  int64_t ffn_hidden = 0;      // SwiGLU's hidden size F; 0 = llama_ffn_hidden(n_embd)
  double rope_theta = 10000;   // RoPE's base
  double norm_eps = 1e-5;      // RMSNorm's eps
  bool tie_embeddings = true;  // lm_head shares embed_tokens' matrix

  int64_t kv_heads() const { return n_kv_head ? n_kv_head : n_head; }
  int64_t head_dim() const { return n_embd / n_head; }
  int64_t ffn() const { return ffn_hidden ? ffn_hidden : llama_ffn_hidden(n_embd); }
  // Llama's hidden size for width C: 8C/3 rounded up to a multiple of 256 as Meta's Llama does
  // when that is at least 2048 (C >= 768), else to a multiple of 64, so that toy widths are not
  // blown up (C = 256: 704, not 768; llama2.c's stories15M, C = 288: 768).
  static int64_t llama_ffn_hidden(int64_t n_embd);

  int64_t table_rows() const { return padded_vocab_size ? padded_vocab_size : vocab_size; }
  // GPT-2 124M as llm.c trains it: L=12, H=12, C=768, T=1024, V=50257 padded to 50304.
  static GPTConfig gpt2();
  // train_gpt --model's presets: "gpt2" (above), and two llamas whose vocabulary is the data's
  // (vocab_size 0 here):
  //   llama-tiny  L=4, H=8, Hkv=4, C=256, F=704, T=128, tied: GQA on Tiny Shakespeare in the
  //               time make train's GPT takes
  //   stories15m  llama2.c's stories15M shape: L=6, H=6, Hkv=6, C=288, F=768, T=256, tied
  // An unknown name is an error listing preset_names().
  static GPTConfig preset(const std::string& name);
  static const char* preset_names();  // "gpt2, llama-tiny, stories15m"
  // `vocab` rounded up to a multiple of 64.
  static int64_t padded(int64_t vocab) { return (vocab + 63) / 64 * 64; }
  // Throws glass::Error naming the bad field (all sizes positive, n_embd % n_head == 0,
  // 0 <= dropout < 1, vocab_size within i32 token ids, padded_vocab_size 0 or >= vocab_size).
  void validate() const;
  std::string str() const;  // "vocab_size=65 block_size=128 n_layer=4 n_head=4 n_embd=256 ..."
};

// Parameter count of a model with this configuration. nanoGPT reports (and uses for MFU) the count
// without the position embedding; wte stays in, because it is also the LM head's matrix.
int64_t gpt_num_parameters(const GPTConfig& config, bool include_position_embedding = true);
// The parameters that do a multiply-add per token: all but gpt2's position table and, for a llama
// with an untied lm_head, the input embedding (a lookup). The N of 6N below.
int64_t flop_parameters(const GPTConfig& config);

// Refuses, before a model of `config` is allocated, a state dict whose tensors hold fewer elements
// than that GPT has parameters. A file's embedding shapes and block names fix the configuration,
// so without this a few kilobytes (wte and wpe [1, 16384], one tensor named transformer.h.0.x)
// would make a loader allocate a model of 3.2e9 parameters before finding the tensors missing.
// Counted in 128 bits: no configuration overflows it. `what` names the file in the error.
void check_state_dict_holds_model(const NamedTensors& state, const GPTConfig& config,
                                  const std::string& what);

// Training FLOPs per token (forward + backward), as in nanoGPT's estimate_mfu (PaLM, appendix B):
//   6 N + 12 L T C
// N = flop_parameters(config): each weight does a multiply-add (2 FLOPs) per token in
// forward and twice that in backward. 12 L T C: per layer, q k^T and probs v cost 2 T C each per
// token forward (4 T C), times 3 for forward + backward; counted over the full T x T square as
// PaLM does, though the causal mask needs only half. T = seq_len, the length trained on. With
// grouped-query attention the term is the same (every query head still scores T keys: GQA saves
// K/V bytes and projection weights, not attention FLOPs); RoPE and SwiGLU's elementwise work,
// O(C) per token, are left out as the norms and GELU are.
double gpt_flops_per_token(const GPTConfig& config, int64_t seq_len);

}  // namespace glass
