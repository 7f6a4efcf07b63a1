// The cost model of training a GPT (nn/gpt.h): memory budget and FLOPs of a step, from the
// configuration alone. samples/roofline prints these; the MFU of train_gpt uses the FLOPs.
//
// Memory: the peak that one training step allocates (the allocator's peak_allocated_bytes, per
// rank), as a sum of named terms. b = bytes per element of the compute dtype (4 f32, 2 bf16);
// N = all parameters; V = the padded vocabulary (GPTConfig::table_rows(), the logits' width);
// R(x) = the allocator's size class of an x-byte tensor (engine/allocator.h).
//   parameters b N (the compute copies under bf16, the parameters themselves under f32), fp32
//   master weights 4 N (only when b < 4), AdamW moments 8 N (m and v in fp32): held all step.
//   gpt2 saved activations (what forward keeps for backward, nn/layers.cpp and autograd/): per
//     layer and token 16 C in b (ln_1's output, qkv 3C, attention's output, the residual sum
//     x + attn that ln_2 keeps, ln_2's output, the MLP's GELU input 4C (rows padded to a multiple
//     of 8, as cuBLASLt stores it) and output 4C, the residual sum that the next LayerNorm keeps)
//     plus 4 + H in fp32 (two LayerNorms' mean and rstd; flash attention's log-sum-exp per head);
//     at the top 2 C in b (the embeddings' sum, ln_f's output), 2 fp32 (the first ln_1's
//     statistics), V in b (the logits) and the batch (tokens and targets, i32).
//   The peak is at one of these points of backward, whichever holds most (peak_at):
//     the LM head's backward: every activation saved, plus its dx (B T C in b, temporaries) and
//       the tied embedding's gradient V C in b (gradients); the fused classifier (emu, cuda) has
//       written the logits' gradient over the logits; cpu's cross-entropy writes it beside them
//       (B T V in b, and a log-sum-exp per row in fp32, temporaries; no gradient yet).
//     the last block's MLP backward: the activations less what the head's backward freed (ln_f's
//       output and statistics, the last residual sum, the logits); gradients: the tied
//       embedding's and ln_f's in fp32, the MLP's weights 8 C^2 + 5 C in b; temporaries: the
//       incoming gradient, the GELU input's gradient and dx (B T (2 C + 4 C) in b).
//     block k's MLP backward, for every k: the same, less what blocks k+1.. saved and plus their
//       gradients in fp32. Linear in k, so the last block, the one before it and the first are
//       compared (block_points, shared with llama); at small batches the gradients outweigh a
//       block's activations and the first block's holds most.
//     the tied embedding's gradient, the end of backward: no activation left; every other
//       parameter's gradient in fp32 (4 (N - V C): the masters' under bf16), and the tied table's
//       gradient three times over in fp32 (the head's share, the embedding's, their sum: 12 V C),
//       under bf16 also the embedding's own before its cast (b V C).
//   workspace: cuBLAS's GEMM workspace on emu and cuda, 32 MiB per device and stream, held from
//   the first GEMM on (kernels/cuda/gemm.cu).
//   size classes: what the allocator's rounding adds, sum of R(x) - x over the tensors above, R
//   the rounding of the device (GptBudgetOptions::size_classes: cpu's small classes too).
//   The ledger of what the model needs is the terms before rounding; what the allocator holds is
//   their total with the rounding. Held to 3% of the measured peak by tests/train/
//   test_memory_ledger.cpp, gpt2 and llama, under every recompute mode. Not modelled: naive
//   attention (the non-flash path: its T x T scores and probabilities are counted as 2 B H T^2
//   per layer in b, unchecked).
//   llama saved activations (nn/llama.cpp, nn/llama_layers.h): per layer and token 4 C +
//     H D + (H + 2 Hkv) D + 3 F in b (RoPE's q, k, v (H + 2 Hkv) D, read by attention;
//     qkv_proj's own output is not kept), attention's output H D, the post-attention norm's
//     residual sum and output, SwiGLU's input gate_up 2 F and output F, the next norm's residual
//     sum and output) plus 2 + H in fp32 (two 1/rms; the log-sum-exp per head); at the top the
//     embedding and the first norm's output 2 C in b and its 1/rms, the logits and the batch, less
//     the last block's residual sum (read by nothing). The same points, with a llama
//     block's tensors (the last block's MLP backward: down_proj's gradient F C, the final norm's
//     and the table's in fp32; temporaries B T (C + F + 2 F) in b). Under --recompute block a
//     block k's re-run backward holds the checkpointed inputs of blocks 1..k, the gradients of
//     the blocks after it, the re-run block and B T (3 C + 3 F) of temporaries: linear in k, so
//     the last block, the one before it and the first are the points to compare.
// Recomputation (GptBudgetOptions::recompute, nn/recompute.h): each layer keeps less (it drops
// `dropped` elements per token, RecomputeWidths below; block keeps only its input, 2 C per token,
// and no statistics), and while backward runs one layer, that layer's recomputed part is alive:
// the recompute term, `rebuilt` elements per token of one layer (block: the whole layer as none
// keeps it), counted at the last block's backward.
// Data parallelism over `world` ranks (GptBudgetOptions::world): each rank's activations are those
// of batch / world rows, and every rank also holds the gradient buckets of comm/data_parallel.h,
// 4 N (f32, the masters' gradients; padded to a multiple of the world size per bucket, at most
// world - 1 elements each, not counted), all step. ZeRO-1 (zero = 1, comm/zero_adamw.h) keeps
// AdamW's moments as two flat buffers of ceil(N / world) fp32 per rank instead of 8 N, and under
// bf16 (b < 4) the f32 master weights as one more such buffer instead of 4 N (the parameters'
// own f32 storage is freed; the all-gather fills the bf16 compute copies); under f32 the
// parameters are the masters and stay whole. The reduce-scatter and all-gather (f32, or bf16 in
// the first half of each bucket's bytes) run in place in the gradient buckets, so they add
// nothing.
// FLOPs per step: (6 N' + 12 L T C) B T, N' = flop_parameters (nn/gpt_config.h explains both
// terms).
#pragma once

#include "engine/allocator.h"
#include "engine/dtype.h"
#include "nn/gpt.h"
#include "nn/recompute.h"

namespace glass::train {

struct GptMemoryBudget {
  int64_t parameters = 0;  // N, wpe included
  // Held at the peak (the header's terms), before the allocator's rounding.
  double parameters_bytes = 0, gradients_bytes = 0, master_bytes = 0, adam_bytes = 0;
  double activations_bytes = 0, temporaries_bytes = 0;
  double recompute_bytes = 0;         // one layer's recomputed part, alive while backward runs it
  double gradient_buckets_bytes = 0;  // data parallelism's flat gradient buffers (world > 1)
  double workspace_bytes = 0;         // cuBLAS's GEMM workspace (emu, cuda), kept for the process
  double size_class_bytes = 0;        // the allocator's rounding of all of them
  const char* peak_at = "";           // which point of the step the peak is at
  double total_bytes() const {
    return parameters_bytes + gradients_bytes + master_bytes + adam_bytes + activations_bytes +
           temporaries_bytes + recompute_bytes + gradient_buckets_bytes + workspace_bytes +
           size_class_bytes;
  }
};

struct GptBudgetOptions {
  // Flash attention keeps a log-sum-exp per row (train_gpt's on every device); naive attention
  // the T x T scores and probabilities.
  bool flash_attention = true;
  // emu, cuda (and meta): the fused classifier, the logits' gradient over the logits; cpu:
  // cross-entropy, beside them.
  bool fused_classifier = true;
  // emu and cuda: the workspace cuBLAS's GEMMs get (kernels/cuda/gemm.cu), made at the first GEMM
  // and kept; cpu has none.
  bool gemm_workspace = true;
  Recompute recompute = Recompute::none;  // train_gpt --recompute
  int64_t world = 1;  // data-parallel ranks; the budget is one rank's (--batch is the global batch)
  int zero =
      0;  // ZeRO stage: 0, or 1 (AdamW's moments, and bf16's masters, sharded over the ranks)
  // How the device's allocator rounds each tensor (engine/allocator.h, SizeClasses::of_device):
  // the default is cuda's (and meta's, and emu's without red zones); cpu counts tensors of up to
  // 1 KiB in 64-byte classes.
  SizeClasses size_classes{};
};

// Per layer and token, in elements: what a recompute mode stops keeping, and what its recomputed
// part holds while backward runs it (block: not used; the whole layer's activations).
//   gpt2   gelu: dropped 4C (the GELU output), rebuilt 4C
//          mlp:  dropped 8C (the GELU's input and output), rebuilt 9C (both and the MLP output)
//   llama  gelu: dropped F (SwiGLU's output), rebuilt F + C (it and down_proj's output)
//          mlp:  dropped 3F (gate_up and SwiGLU's output), rebuilt 3F + C
struct RecomputeWidths {
  double dropped = 0, rebuilt = 0;
};
RecomputeWidths recompute_widths(const GPTConfig& config, Recompute mode);

// The forward FLOPs per token that backward recomputes (hardware FLOPs minus model FLOPs):
//   gelu   gpt2: 2 C 4C per layer on emu and cuda, and on cpu in bf16 (the c_fc GEMM again: its
//          GELU is the GEMM's epilogue, on the unrounded sum), 0 counted on cpu in f32 (an
//          elementwise GELU); llama: 2 F C (down_proj again)
//   mlp    the MLP's GEMMs, 2 (C 4C + 4C C) (gpt2) or 2 (C 2F + F C) (llama) per layer
//   block  the layer's whole forward: a third of (6 N'_layer + 12 T C) per layer
double recompute_flops_per_token(const GPTConfig& config, int64_t seq_len, Recompute mode,
                                 bool gelu_in_gemm_epilogue);

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
