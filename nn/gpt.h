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

#include "nn/layers.h"

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
  // `vocab` rounded up to a multiple of 64.
  static int64_t padded(int64_t vocab) { return (vocab + 63) / 64 * 64; }
  // Throws glass::Error naming the bad field (all sizes positive, n_embd % n_head == 0,
  // 0 <= dropout < 1, vocab_size within i32 token ids, padded_vocab_size 0 or >= vocab_size).
  void validate() const;
  std::string str() const;  // "vocab_size=65 block_size=128 n_layer=4 n_head=4 n_embd=256 ..."
};

class GPT : public Module {
 public:
  // Dropout layers draw from `dropout_gen` (a checkpoint saves its state for bit-exact resume).
  explicit GPT(const GPTConfig& config, Generator& dropout_gen = default_generator());

  // nanoGPT's initialisation, drawn from `gen` in parameter order (deterministic for a seed):
  // Linear and Embedding weights N(0, 0.02^2), the residual projections (attn.c_proj and
  // mlp.c_proj weights) N(0, (0.02/sqrt(2 n_layer))^2), biases 0, LayerNorm weight 1 / bias 0.
  void init(Generator& gen);

  // The kernel behind every block's causal attention (autograd/ops.h: AttentionKernel).
  void set_attention(AttentionKernel kernel);

  // ids i32 [B, T] with 1 <= T <= block_size -> logits [B, T, table_rows()] (classes first).
  Tensor forward(const Tensor& ids) const;
  // The mean cross-entropy of logits [B, T, table_rows()] against targets i32 [B, T], over the
  // classes [0, vocab_size). On emu and cuda, for f32 logits, the fused classifier
  // (autograd/classifier.cpp), which consumes the logits; elsewhere (cpu, bf16 logits) the
  // reference: cross_entropy of the logits' class columns.
  Tensor loss(const Tensor& logits, const Tensor& targets) const;

  // The configuration a state dict's shapes imply: vocab_size and n_embd from wte, block_size
  // from wpe, n_layer from the transformer.h.{i} indices (which must be 0..n_layer-1). n_head
  // cannot be read from shapes and must be given.
  static GPTConfig config_from_state_dict(const NamedTensors& state, int64_t n_head);

  const GPTConfig config;
  Embedding wte, wpe;
  Dropout drop;
  std::vector<std::unique_ptr<Block>> h;
  LayerNorm ln_f;

 private:
  // The position ids 0..T-1 on a device, uploaded once per (device, T) and kept: no upload per
  // forward, and a CUDA graph that captured a forward reads ids that are still there.
  const Tensor& position_ids(int64_t T, Device device) const;
  mutable std::mutex positions_mu_;
  mutable std::map<std::string, Tensor> positions_;
};

// Parameter count of a GPT with this configuration. nanoGPT reports (and uses for MFU) the count
// without the position embedding; wte stays in, because it is also the LM head's matrix.
int64_t gpt_num_parameters(const GPTConfig& config, bool include_position_embedding = true);

// Refuses, before a GPT of `config` is allocated, a state dict whose tensors hold fewer elements
// than that GPT has parameters. A file's embedding shapes and block names fix the configuration,
// so without this a few kilobytes (wte and wpe [1, 16384], one tensor named transformer.h.0.x)
// would make a loader allocate a model of 3.2e9 parameters before finding the tensors missing.
// Counted in 128 bits: no configuration overflows it. `what` names the file in the error.
void check_state_dict_holds_model(const NamedTensors& state, const GPTConfig& config,
                                  const std::string& what);

// Training FLOPs per token (forward + backward), as in nanoGPT's estimate_mfu (PaLM, appendix B):
//   6 N + 12 L T C
// N = gpt_num_parameters(config, false): each weight does a multiply-add (2 FLOPs) per token in
// forward and twice that in backward. 12 L T C: per layer, q k^T and probs v cost 2 T C each per
// token forward (4 T C), times 3 for forward + backward; counted over the full T x T square as
// PaLM does, though the causal mask needs only half. T = seq_len, the length trained on.
double gpt_flops_per_token(const GPTConfig& config, int64_t seq_len);

}  // namespace glass
