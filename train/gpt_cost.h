// The cost model of training a GPT (nn/gpt.h): memory budget and FLOPs of a step, from the
// configuration alone. samples/roofline prints these; the MFU of train_gpt uses the FLOPs.
//
// Memory, for parameters stored in dtype b (bytes per element), N = all parameters:
//   parameters b N, gradients b N, fp32 master weights 4 N (only when b < 4), AdamW moments 8 N
//   (m and v in fp32);
//   saved activations: llm.c's list of what a GPT-2 step keeps from forward for backward, in b:
//     per layer 18 B T C (ln_1, qkv 3x, attention out, attn proj, residual, ln_2, fc 4x, gelu 4x,
//     mlp proj, residual) + 4 B T (LayerNorm means and reciprocal std) + 2 B H T^2 (scores and
//     probabilities, as an attention without flash keeps them); at the top 2 B T C (embeddings,
//     ln_f) + 2 B T (ln_f stats) + 2 B T V (logits, probabilities) + B T (losses);
//     A llama layer keeps 7 C + (H + 2 Hkv) D + 3 F per token (input_layernorm, the rotated qkv,
//     attention out, o_proj, residual, post_attention_layernorm, gate_up 2F, swiglu F, down_proj,
//     residual) and 2 B T statistics (two RMSNorms' rstd); its top 2 B T C + B T (norm's rstd).
//   temporaries: the largest buffers alive at once in backward, estimated as the logits' gradient
//     B T V plus one layer of activation gradients (the per-layer term above).
//   The fast path (GptBudgetOptions::fast, the GPT-2 preset's): flash attention keeps no T x T
//   matrix, only the log-sum-exp of each row, 4 B H T bytes (f32) per layer instead of
//   2 b B H T^2; the fused classifier writes the logits' gradient over the logits, so the top
//   keeps B T V (logits) instead of 2 B T V and there is no B T V temporary.
//   V is the padded vocabulary (GPTConfig::table_rows()), the logits' width.
// Data parallelism over `world` ranks (GptBudgetOptions::world; --batch is the global batch, each
// rank's activations are those of batch / world rows): every rank also holds the gradient
// buckets of comm/data_parallel.h, 4 N (f32, the masters' gradients; padded to a multiple of the
// world size per bucket, at most world - 1 elements each, not counted). ZeRO-1 (zero = 1,
// comm/zero_adamw.h) keeps 8 ceil(N / world) of AdamW moments per rank instead of 8 N; the f32
// master weights stay whole (they are the model's parameters, from which every rank refreshes its
// compute copies after the all-gather), and the reduce-scatter and all-gather run in place in the
// gradient buckets, so they add nothing.
// FLOPs per step: (6 N' + 12 L T C) B T, N' = flop_parameters (nn/gpt_config.h explains both
// terms).
#pragma once

#include "engine/dtype.h"
#include "nn/gpt.h"

namespace glass::train {

struct GptMemoryBudget {
  int64_t parameters = 0;  // N, wpe included
  double parameters_bytes = 0, gradients_bytes = 0, master_bytes = 0, adam_bytes = 0;
  double activations_bytes = 0, temporaries_bytes = 0;
  double gradient_buckets_bytes = 0;  // data parallelism's flat gradient buffers (world > 1)
  double total_bytes() const {
    return parameters_bytes + gradients_bytes + master_bytes + adam_bytes + activations_bytes +
           temporaries_bytes + gradient_buckets_bytes;
  }
};

struct GptBudgetOptions {
  bool fast = false;  // flash attention and the fused classifier (see above)
  int64_t world = 1;  // data-parallel ranks; the budget is one rank's
  int zero = 0;       // ZeRO stage: 0, or 1 (AdamW's moments sharded over the ranks)
};

// What one layer keeps from forward for backward, in elements per token (the list above).
double layer_activation_width(const GPTConfig& config);

GptMemoryBudget gpt_memory_budget(const GPTConfig& config, int64_t batch, int64_t seq_len,
                                  DType dtype, GptBudgetOptions options = {});

struct GptStepFlops {
  double six_n = 0;      // 6 N' per token
  double attention = 0;  // 12 L T C per token
  double tokens = 0;     // B T
  double per_token() const { return six_n + attention; }
  double total() const { return per_token() * tokens; }
};

GptStepFlops gpt_step_flops(const GPTConfig& config, int64_t batch, int64_t seq_len);

// A mixture-of-experts variant on paper (roofline model --n-expert E --top-k k): every layer's
// MLP becomes E experts, each the model's MLP (SwiGLU of F for a llama, GELU of 4C for gpt2),
// plus a router [E, C] per layer; each token runs through k of them. What a token computes comes
// from the active parameters, what memory holds from the resident ones:
//   resident = N + L ((E - 1) mlp + E C),  active = N + L ((k - 1) mlp + E C)
// with mlp = 3 F C (llama) or 8 C^2 + 5 C (gpt2) parameters per expert. E = 1, k = 1 is the
// dense model plus a router of C per layer, so E = 1 is refused: it is the model itself.
struct ExpertParameters {
  int64_t n_expert = 0, top_k = 0;
  int64_t mlp = 0;       // one expert's parameters
  int64_t resident = 0;  // every parameter the model stores
  int64_t active = 0;    // the parameters one token's forward uses
};
ExpertParameters expert_parameters(const GPTConfig& config, int64_t n_expert, int64_t top_k);

}  // namespace glass::train
