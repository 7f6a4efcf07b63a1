#include "train/gpt_cost.h"

#include <cmath>
#include <vector>

#include "engine/allocator.h"
#include "engine/error.h"
#include "kernels/cuda/cuda_kernels.h"

namespace glass::train {

namespace {

void check_sizes(const GPTConfig& c, int64_t batch, int64_t seq_len) {
  c.validate();
  GLASS_CHECK(batch > 0 && seq_len > 0, "GPT cost: batch {} and seq_len {} must be positive", batch,
              seq_len);
  GLASS_CHECK(seq_len <= c.block_size, "GPT cost: seq_len {} is longer than block_size {}", seq_len,
              c.block_size);
}

}  // namespace

double layer_activation_width(const GPTConfig& c) {
  const double C = static_cast<double>(c.n_embd);
  if (c.arch == Arch::gpt2) return 16 * C;
  const double qkv = static_cast<double>((c.n_head + 2 * c.kv_heads()) * c.head_dim());
  return 7 * C + qkv + 3 * static_cast<double>(c.ffn());
}

namespace {

// Tensors counted into a term: the bytes the formula gives, and what the allocator holds for them
// (each rounded to its size class).
struct Held {
  double bytes = 0, rounded = 0;
  void add(double count, double each) {
    bytes += count * each;
    rounded += count * static_cast<double>(Allocator::size_class(static_cast<size_t>(each)));
  }
  void add(const Held& h, double count = 1) {
    bytes += count * h.bytes;
    rounded += count * h.rounded;
  }
};

// ZeRO-1 over more than one rank: AdamW's moments are sharded.
bool sharded(const GptBudgetOptions& o) { return o.zero == 1 && o.world > 1; }

// One point of the step: what each term holds there.
struct PeakPoint {
  explicit PeakPoint(const char* point) : name(point) {}
  const char* name;
  Held parameters, gradients, master, adam, activations, temporaries, recompute, buckets;
  double rounded() const {
    return parameters.rounded + gradients.rounded + master.rounded + adam.rounded +
           activations.rounded + temporaries.rounded + recompute.rounded + buckets.rounded;
  }
};

// The parameters' element counts, one per tensor, in nn/gpt.cpp's order less wte (the table).
std::vector<double> gpt2_tensors_but_table(const GPTConfig& c) {
  const double C = static_cast<double>(c.n_embd);
  std::vector<double> t = {static_cast<double>(c.block_size) * C};  // wpe
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (double n : {C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C})
      t.push_back(n);
  t.push_back(C);  // ln_f
  t.push_back(C);
  return t;
}

// The header's gpt2 ledger: the three points of the step, the one that holds most.
GptMemoryBudget gpt2_budget(const GPTConfig& c, int64_t batch, int64_t seq_len, double b,
                            GptBudgetOptions o) {
  const double B = static_cast<double>(batch), T = static_cast<double>(seq_len);
  const double BT = B * T, C = static_cast<double>(c.n_embd), H = static_cast<double>(c.n_head);
  const double L = static_cast<double>(c.n_layer), V = static_cast<double>(c.table_rows());
  const double aux = static_cast<double>((c.n_embd * 4 + 7) / 8 * 8);  // gemm_aux_ld(4 C)
  // Held all step: the parameters (compute dtype), the masters (under bf16), the moments.
  Held params, masters, moments;
  std::vector<double> tensors = gpt2_tensors_but_table(c);
  tensors.push_back(V * C);
  double N = 0;
  for (double n : tensors) {
    params.add(1, b * n);
    if (b < 4 && !sharded(o)) masters.add(1, 4 * n);
    if (!sharded(o)) moments.add(2, 4 * n);
    N += n;
  }
  // Data parallelism (the header): the gradient buckets; ZeRO-1's two flat moment shards, and
  // under bf16 its flat shard of the masters.
  Held buckets;
  if (o.world > 1) buckets.add(1, 4 * N);
  const double shard = std::ceil(N / static_cast<double>(o.world));
  if (sharded(o)) moments.add(2, 4 * shard);
  if (sharded(o) && b < 4) masters.add(1, 4 * shard);
  // Saved activations: one layer's as --recompute none keeps it, and the top's.
  Held full_layer, top;
  full_layer.add(5, b * BT * C);  // ln_1 out, attention out, x + attn, ln_2 out, next residual sum
  full_layer.add(1, b * BT * 3 * C);
  full_layer.add(1, b * BT * aux);    // the GELU's input
  full_layer.add(1, b * BT * 4 * C);  // its output
  full_layer.add(4, 4 * BT);          // two LayerNorms' mean and rstd
  if (o.flash_attention)
    full_layer.add(1, 4 * B * H * T);  // log-sum-exp per row and head
  else
    full_layer.add(2, b * B * H * T * T);  // scores and probabilities
  // What a layer keeps under the recompute mode, and what backward rebuilds of one layer.
  Held layer = full_layer, rebuilt;
  switch (o.recompute) {
    case Recompute::none:
      break;
    case Recompute::gelu:  // the GELU's output
      layer.add(-1, b * BT * 4 * C);
      rebuilt.add(1, b * BT * 4 * C);
      break;
    case Recompute::mlp:  // the GELU's input and output; the re-run also makes the MLP's output
      layer.add(-1, b * BT * aux);
      layer.add(-1, b * BT * 4 * C);
      rebuilt.add(1, b * BT * aux);
      rebuilt.add(1, b * BT * 4 * C);
      rebuilt.add(1, b * BT * C);
      break;
    case Recompute::block:  // only the block's input (the residual stream and ln_1's output)
      layer = Held{};
      layer.add(2, b * BT * C);
      rebuilt = full_layer;
      break;
  }
  top.add(2, b * BT * C);  // the embeddings' sum (the first ln_1's input), ln_f's output
  top.add(2, 4 * BT);      // the first ln_1's statistics
  top.add(1, b * BT * V);  // the logits
  top.add(2, 4 * BT);      // the batch: tokens and targets, i32
  Held saved;
  saved.add(layer, L);
  saved.add(top);

  PeakPoint head{"the LM head's backward"}, block{"the last block's MLP backward"},
      end{"the tied embedding's gradient (the end of backward)"};
  for (PeakPoint* p : {&head, &block, &end}) {
    p->parameters = params;
    p->master = masters;
    p->adam = moments;
    p->buckets = buckets;
  }
  head.activations = saved;
  if (o.fused_classifier) {
    head.temporaries.add(1, b * BT * C);  // dx
    head.gradients.add(1, b * V * C);     // the table's share from the head
  } else {
    head.temporaries.add(1, b * BT * V);  // the logits' gradient beside the logits
    head.temporaries.add(1, 4 * BT);      // cross-entropy's log-sum-exp per row
  }
  // Freed by then: ln_f's output and statistics, the last residual sum, the logits.
  Held freed;
  freed.add(2, b * BT * C);
  freed.add(2, 4 * BT);
  freed.add(1, b * BT * V);
  block.activations = saved;
  block.activations.bytes -= freed.bytes;
  block.activations.rounded -= freed.rounded;
  block.gradients.add(1, 4 * V * C);  // the table's share, cast to fp32
  block.gradients.add(2, 4 * C);      // ln_f
  block.gradients.add(2, b * 4 * C * C);
  block.gradients.add(1, b * 4 * C);
  block.gradients.add(1, b * C);
  block.recompute = rebuilt;  // the last layer's recomputed part, alive while backward runs it
  block.temporaries.add(2, b * BT * C);  // the incoming gradient, dx
  block.temporaries.add(1, b * BT * aux);
  end.activations.add(2, 4 * BT);  // the batch
  for (double n : gpt2_tensors_but_table(c)) end.gradients.add(1, 4 * n);
  end.gradients.add(1, 4 * V * C);               // the table's .grad
  end.temporaries.add(2, 4 * V * C);             // the head's share and the embedding's, in fp32
  if (b < 4) end.temporaries.add(1, b * V * C);  // the embedding's, before its cast
  const PeakPoint* peak = &head;
  for (const PeakPoint* p : {&block, &end})
    if (p->rounded() > peak->rounded()) peak = p;

  GptMemoryBudget m;
  m.parameters_bytes = peak->parameters.bytes;
  m.gradients_bytes = peak->gradients.bytes;
  m.master_bytes = peak->master.bytes;
  m.adam_bytes = peak->adam.bytes;
  m.activations_bytes = peak->activations.bytes;
  m.temporaries_bytes = peak->temporaries.bytes;
  m.recompute_bytes = peak->recompute.bytes;
  m.gradient_buckets_bytes = peak->buckets.bytes;
  m.size_class_bytes = peak->rounded() - (m.parameters_bytes + m.gradients_bytes + m.master_bytes +
                                          m.adam_bytes + m.activations_bytes + m.temporaries_bytes +
                                          m.recompute_bytes + m.gradient_buckets_bytes);
  m.peak_at = peak->name;
  return m;
}

// The llama estimate of the header (llm.c's list, not checked against the allocator).
GptMemoryBudget llama_budget(const GPTConfig& c, int64_t batch, int64_t seq_len, double b,
                             GptBudgetOptions o) {
  const double B = static_cast<double>(batch), T = static_cast<double>(seq_len);
  const double C = static_cast<double>(c.n_embd), H = static_cast<double>(c.n_head);
  const double L = static_cast<double>(c.n_layer), V = static_cast<double>(c.table_rows());
  const double N = static_cast<double>(gpt_num_parameters(c, true));
  const double kept = layer_activation_width(c);
  GptMemoryBudget m;
  m.parameters_bytes = b * N;
  m.gradients_bytes = b * N;
  const double shard = sharded(o) ? std::ceil(N / static_cast<double>(o.world)) : N;
  m.master_bytes = b < 4 ? 4 * shard : 0;
  m.adam_bytes = 8 * shard;
  m.gradient_buckets_bytes = o.world > 1 ? 4 * N : 0;
  const double attention = o.flash_attention ? 0 : 2 * B * H * T * T;
  const double lse_bytes = o.flash_attention ? 4 * B * H * T : 0;
  const double per_layer = kept * B * T + 2 * B * T + attention;
  const double logits = o.fused_classifier ? B * T * V : 2 * B * T * V;
  m.activations_bytes = b * (L * per_layer + 2 * B * T * C + B * T + logits) + L * lse_bytes;
  m.temporaries_bytes = b * (per_layer + (o.fused_classifier ? 0 : B * T * V)) + lse_bytes;
  // Recomputation: each layer keeps less, and one layer's recomputed part is alive in backward.
  const double layer_bytes = b * per_layer + lse_bytes;  // one layer as none keeps it
  if (o.recompute == Recompute::block) {
    m.activations_bytes -= L * (layer_bytes - b * 2 * C * B * T);
    m.recompute_bytes = layer_bytes;
  } else if (o.recompute != Recompute::none) {
    const RecomputeWidths w = recompute_widths(c, o.recompute);
    m.activations_bytes -= L * b * w.dropped * B * T;
    m.recompute_bytes = b * w.rebuilt * B * T;
  }
  m.peak_at = "an estimate (llama)";
  return m;
}

}  // namespace

GptMemoryBudget gpt_memory_budget(const GPTConfig& c, int64_t batch, int64_t seq_len, DType dtype,
                                  GptBudgetOptions options) {
  check_sizes(c, batch, seq_len);
  GLASS_CHECK(dtype == DType::f32 || dtype == DType::bf16,
              "GPT memory budget: dtype {} is not a training dtype (f32 or bf16)",
              dtype_name(dtype));
  GLASS_CHECK(options.world >= 1, "GPT memory budget: --world {} must be at least 1",
              options.world);
  GLASS_CHECK(options.zero == 0 || options.zero == 1,
              "GPT memory budget: --zero {}: expected 0 or 1", options.zero);
  GLASS_CHECK(batch % options.world == 0,
              "GPT memory budget: --batch {} (the global batch) does not split over --world {} "
              "ranks",
              batch, options.world);
  const double b = static_cast<double>(dtype_size(dtype));
  const int64_t rows = batch / options.world;  // one rank's share of the batch
  GptMemoryBudget m = c.arch == Arch::gpt2 ? gpt2_budget(c, rows, seq_len, b, options)
                                           : llama_budget(c, rows, seq_len, b, options);
  m.parameters = gpt_num_parameters(c, true);
  if (options.gemm_workspace)
    m.workspace_bytes = static_cast<double>(kernels::cuda::kGemmWorkspaceBytes);
  return m;
}

RecomputeWidths recompute_widths(const GPTConfig& c, Recompute mode) {
  const double C = static_cast<double>(c.n_embd);
  const double hidden = c.arch == Arch::gpt2 ? 4 * C : static_cast<double>(c.ffn());
  switch (mode) {
    case Recompute::gelu:  // the activation's output (llama: and down_proj's output again)
      return c.arch == Arch::gpt2 ? RecomputeWidths{hidden, hidden}
                                  : RecomputeWidths{hidden, hidden + C};
    case Recompute::mlp:  // the activation's input and output, and the MLP's output again
      return c.arch == Arch::gpt2 ? RecomputeWidths{2 * hidden, 2 * hidden + C}
                                  : RecomputeWidths{3 * hidden, 3 * hidden + C};
    case Recompute::none:
    case Recompute::block:
      break;
  }
  return {};
}

double recompute_flops_per_token(const GPTConfig& c, int64_t seq_len, Recompute mode,
                                 bool gelu_in_gemm_epilogue) {
  const double C = static_cast<double>(c.n_embd), L = static_cast<double>(c.n_layer);
  const double T = static_cast<double>(seq_len);
  const bool gpt2 = c.arch == Arch::gpt2;
  const double hidden = gpt2 ? 4 * C : static_cast<double>(c.ffn());
  // One layer's matrices: attention's projections, then the MLP's.
  const double qkv =
      gpt2 ? 3 * C : static_cast<double>((c.n_head + 2 * c.kv_heads()) * c.head_dim());
  const double mlp_matrix = gpt2 ? 2 * hidden * C : 3 * hidden * C;
  const double layer_matrix = qkv * C + C * C + mlp_matrix;
  switch (mode) {
    case Recompute::none:
      return 0;
    case Recompute::gelu:
      if (!gpt2) return L * 2 * hidden * C;
      return gelu_in_gemm_epilogue ? L * 2 * C * hidden : 0;
    case Recompute::mlp:
      return L * 2 * mlp_matrix;
    case Recompute::block:
      return L * (2 * layer_matrix + 4 * T * C);
  }
  return 0;
}

GptStepFlops gpt_step_flops(const GPTConfig& c, int64_t batch, int64_t seq_len) {
  check_sizes(c, batch, seq_len);
  GptStepFlops f;
  f.six_n = 6 * static_cast<double>(flop_parameters(c));
  // nn/gpt.h's estimate is 6 N' + 12 L T C: the attention term is what it adds to 6 N'.
  f.attention = gpt_flops_per_token(c, seq_len) - f.six_n;
  f.tokens = static_cast<double>(batch * seq_len);
  return f;
}

ExpertParameters expert_parameters(const GPTConfig& c, int64_t n_expert, int64_t top_k) {
  c.validate();
  GLASS_CHECK(n_expert >= 2, "--n-expert {}: a mixture needs at least 2 experts", n_expert);
  GLASS_CHECK(top_k >= 1 && top_k <= n_expert, "--top-k {} must be in [1, --n-expert={}]", top_k,
              n_expert);
  const int64_t C = c.n_embd, L = c.n_layer;
  ExpertParameters e{.n_expert = n_expert, .top_k = top_k};
  e.mlp = c.arch == Arch::llama ? 3 * c.ffn() * C : 8 * C * C + 5 * C;
  const int64_t dense = gpt_num_parameters(c, true), router = n_expert * C;
  e.resident = dense + L * ((n_expert - 1) * e.mlp + router);
  e.active = dense + L * ((top_k - 1) * e.mlp + router);
  return e;
}

}  // namespace glass::train
