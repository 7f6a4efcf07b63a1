#include "train/gpt_cost.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
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
  const double heads = static_cast<double>(c.n_head * c.head_dim());
  return 4 * C + heads + qkv + 3 * static_cast<double>(c.ffn());
}

namespace {

// The rounding of the budget being computed (GptBudgetOptions::size_classes), set for its
// computation by gpt_memory_budget; Held::add rounds with it.
thread_local SizeClasses budget_classes;

class BudgetClassesScope {
 public:
  explicit BudgetClassesScope(SizeClasses classes) : saved_(budget_classes) {
    budget_classes = classes;
  }
  ~BudgetClassesScope() { budget_classes = saved_; }
  BudgetClassesScope(const BudgetClassesScope&) = delete;
  BudgetClassesScope& operator=(const BudgetClassesScope&) = delete;

 private:
  SizeClasses saved_;
};

// Tensors counted into a term: the bytes the formula gives, and what the allocator holds for them
// (each rounded to its size class).
struct Held {
  double bytes = 0, rounded = 0;
  void add(double count, double each) {
    bytes += count * each;
    rounded += count * static_cast<double>(budget_classes.of(static_cast<size_t>(each)));
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

// Held all step: the parameters (compute dtype), the masters (under bf16), the moments; with
// data parallelism (the header) the gradient buckets, and under ZeRO-1 the masters' and moments'
// flat shards instead.
struct State {
  Held params, masters, moments, buckets;
  void hold_in(PeakPoint& p) const {
    p.parameters = params;
    p.master = masters;
    p.adam = moments;
    p.buckets = buckets;
  }
};

State state_of(const std::vector<double>& tensors_but_table, double table, double b,
               const GptBudgetOptions& o) {
  State s;
  double N = 0;
  auto hold = [&](double n) {
    s.params.add(1, b * n);
    if (b < 4 && !sharded(o)) s.masters.add(1, 4 * n);
    if (!sharded(o)) s.moments.add(2, 4 * n);
    N += n;
  };
  for (double n : tensors_but_table) hold(n);
  hold(table);
  if (o.world > 1) s.buckets.add(1, 4 * N);
  // ZeRO-1: two flat moment shards, and under bf16 a flat shard of the masters.
  const double shard = std::ceil(N / static_cast<double>(o.world));
  if (sharded(o)) s.moments.add(2, 4 * shard);
  if (sharded(o) && b < 4) s.masters.add(1, 4 * shard);
  return s;
}

// The budget at whichever of the step's points holds most (size classes included).
GptMemoryBudget budget_at_highest(std::initializer_list<const PeakPoint*> points) {
  const PeakPoint* peak = *points.begin();
  for (const PeakPoint* p : points)
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

// Block k's MLP backward for the blocks where the peak can be, gpt2's and llama's alike: what
// such a point holds is linear in k (the saved activations of blocks 0..k grow with k, the
// gradients of the blocks after k shrink with it), so the highest is at one end, or next to it
// where the last block differs from the others (the incoming gradient, the top's tensors): the
// last block, the one before it and the first. `make(k, name)` builds the point of block k.
struct BlockPoints {
  PeakPoint last, before_last, first;
};
template <class Make>
BlockPoints block_points(int64_t n_layer, Recompute mode, const Make& make) {
  const bool rerun = mode == Recompute::block;
  return {
      make(n_layer - 1,
           rerun ? "the last block's re-run MLP backward" : "the last block's MLP backward"),
      make(std::max<int64_t>(n_layer - 2, 0), rerun ? "the last block but one's re-run MLP backward"
                                                    : "the last block but one's MLP backward"),
      make(0, rerun ? "the first block's re-run MLP backward" : "the first block's MLP backward")};
}

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
  std::vector<double> tensors = gpt2_tensors_but_table(c);
  const State state = state_of(tensors, V * C, b, o);
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

  PeakPoint head{"the LM head's backward"},
      end{"the tied embedding's gradient (the end of backward)"};
  for (PeakPoint* p : {&head, &end}) state.hold_in(*p);
  head.activations = saved;
  if (o.fused_classifier) {
    head.temporaries.add(1, b * BT * C);  // dx
    head.gradients.add(1, b * V * C);     // the table's share from the head
  } else {
    head.temporaries.add(1, b * BT * V);  // the logits' gradient beside the logits
    head.temporaries.add(1, 4 * BT);      // cross-entropy's log-sum-exp per row
  }
  // Block k's MLP backward. Freed by then: ln_f's output and statistics, the last residual sum,
  // the logits, and every block after k (what it saved, or under block its checkpointed input);
  // the gradients of those blocks and ln_f are made, in fp32, and block k's MLP weight gradients
  // in b; its re-run part is alive. At the last block the gradients are ln_f's and the table's
  // share; at the first nearly every gradient is there while only one block's activations are:
  // at small batches the peak moves there.
  Held freed;
  freed.add(2, b * BT * C);
  freed.add(2, 4 * BT);
  freed.add(1, b * BT * V);
  const std::vector<double> tensors_but_table = gpt2_tensors_but_table(c);
  auto block_backward = [&](int64_t k, const char* name) {
    PeakPoint p{name};
    state.hold_in(p);
    p.activations = saved;
    p.activations.bytes -= freed.bytes;
    p.activations.rounded -= freed.rounded;
    p.activations.add(layer, -static_cast<double>(c.n_layer - 1 - k));
    p.gradients.add(1, 4 * V * C);  // the table's share, cast to fp32
    for (size_t i = static_cast<size_t>(1 + 12 * (k + 1)); i < tensors_but_table.size(); ++i)
      p.gradients.add(1, 4 * tensors_but_table[i]);  // the blocks after k and ln_f
    p.gradients.add(2, b * 4 * C * C);
    p.gradients.add(1, b * 4 * C);
    p.gradients.add(1, b * C);
    p.recompute = rebuilt;             // block k's recomputed part, alive while backward runs it
    p.temporaries.add(2, b * BT * C);  // the incoming gradient, dx
    p.temporaries.add(1, b * BT * aux);
    return p;
  };
  const BlockPoints blocks = block_points(c.n_layer, o.recompute, block_backward);
  end.activations.add(2, 4 * BT);  // the batch
  for (double n : tensors_but_table) end.gradients.add(1, 4 * n);
  end.gradients.add(1, 4 * V * C);               // the table's .grad
  end.temporaries.add(2, 4 * V * C);             // the head's share and the embedding's, in fp32
  if (b < 4) end.temporaries.add(1, b * V * C);  // the embedding's, before its cast
  return budget_at_highest({&head, &blocks.last, &blocks.before_last, &blocks.first, &end});
}

// The parameters' element counts of a llama (nn/llama.cpp), less embed_tokens (the table).
std::vector<double> llama_tensors_but_table(const GPTConfig& c) {
  const double C = static_cast<double>(c.n_embd), F = static_cast<double>(c.ffn());
  const double qkv = static_cast<double>((c.n_head + 2 * c.kv_heads()) * c.head_dim());
  const double heads = static_cast<double>(c.n_head * c.head_dim());
  std::vector<double> t;
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (double n : {C, qkv * C, heads * C, C, 2 * F * C, F * C}) t.push_back(n);
  t.push_back(C);                                                               // the final norm
  if (!c.tie_embeddings) t.push_back(static_cast<double>(c.table_rows()) * C);  // lm_head
  return t;
}

// The header's llama ledger: the same three points as gpt2's, with a llama block's tensors.
GptMemoryBudget llama_budget(const GPTConfig& c, int64_t batch, int64_t seq_len, double b,
                             GptBudgetOptions o) {
  const double B = static_cast<double>(batch), T = static_cast<double>(seq_len);
  const double BT = B * T, C = static_cast<double>(c.n_embd), H = static_cast<double>(c.n_head);
  const double L = static_cast<double>(c.n_layer), V = static_cast<double>(c.table_rows());
  const double F = static_cast<double>(c.ffn());
  const double qkv = static_cast<double>((c.n_head + 2 * c.kv_heads()) * c.head_dim());
  const double heads = static_cast<double>(c.n_head * c.head_dim());
  const std::vector<double> tensors = llama_tensors_but_table(c);
  const State state = state_of(tensors, V * C, b, o);
  // One block as --recompute none keeps it: RoPE's q, k, v (attention's inputs; qkv_proj's own
  // output is not kept), attention's output, the post-attention and next norms' residual sum,
  // normalised output and fp32 1/rms per row, SwiGLU's input (gate_up) and output.
  Held full_layer;
  full_layer.add(1, b * BT * qkv);
  full_layer.add(1, b * BT * heads);
  if (o.flash_attention)
    full_layer.add(1, 4 * B * H * T);  // log-sum-exp per row and head
  else
    full_layer.add(2, b * B * H * T * T);  // scores and probabilities
  full_layer.add(4, b * BT * C);
  full_layer.add(2, 4 * BT);
  full_layer.add(1, b * BT * 2 * F);
  full_layer.add(1, b * BT * F);
  Held layer = full_layer, rebuilt;
  switch (o.recompute) {
    case Recompute::none:
      break;
    case Recompute::gelu:  // SwiGLU's output; the re-run makes it and down_proj's output again
      layer.add(-1, b * BT * F);
      rebuilt.add(1, b * BT * F);
      rebuilt.add(1, b * BT * C);
      break;
    case Recompute::mlp:  // SwiGLU's input and output; the re-run also makes the MLP's output
      layer.add(-1, b * BT * 2 * F);
      layer.add(-1, b * BT * F);
      rebuilt.add(1, b * BT * 2 * F);
      rebuilt.add(1, b * BT * F);
      rebuilt.add(1, b * BT * C);
      break;
    case Recompute::block:  // only the block's input stream (the residual and its norm)
      layer = Held{};
      layer.add(2, b * BT * C);
      rebuilt = full_layer;
      break;
  }
  Held top;
  top.add(2, b * BT * C);  // the embedding (the first residual) and the first input_layernorm's
  top.add(1, 4 * BT);      // ... 1/rms
  top.add(1, b * BT * V);  // the logits
  top.add(2, 4 * BT);      // the batch: tokens and targets, i32
  if (o.recompute == Recompute::block) {
    top.add(1, b * BT * C);  // the final norm's output and 1/rms, outside every checkpoint
    top.add(1, 4 * BT);
  } else {
    top.add(-1, b * BT * C);  // the last block's residual sum: read by nothing after it
  }
  Held saved;
  saved.add(layer, L);
  saved.add(top);

  PeakPoint head{"the LM head's backward"},
      end{c.tie_embeddings ? "the tied embedding's gradient (the end of backward)"
                           : "the embedding's gradient (the end of backward)"};
  for (PeakPoint* p : {&head, &end}) state.hold_in(*p);
  head.activations = saved;
  if (o.fused_classifier) {
    head.temporaries.add(1, b * BT * C);  // dx
    head.gradients.add(1, b * V * C);     // the head's weight gradient
  } else {
    head.temporaries.add(1, b * BT * V);  // the logits' gradient beside the logits
    head.temporaries.add(1, 4 * BT);      // cross-entropy's log-sum-exp per row
  }
  end.activations.add(2, 4 * BT);  // the batch
  for (double n : tensors) end.gradients.add(1, 4 * n);
  end.gradients.add(1, 4 * V * C);                          // the table's .grad
  if (c.tie_embeddings) end.temporaries.add(2, 4 * V * C);  // the head's and embedding's shares
  if (b < 4) end.temporaries.add(1, b * V * C);  // the embedding's gradient, before its fp32 cast
  // Block k's MLP backward, at SwiGLU's backward: blocks 0..k-1 keep what they saved (under
  // --recompute block, their checkpointed inputs: the first's is the embedding's); block k less
  // its next norm's output, residual sum and 1/rms (read by then) and its SwiGLU output (read by
  // down_proj's backward; under gelu and mlp that is the re-run's); the gradients of the blocks
  // after it and of its own down_proj; the incoming gradients and SwiGLU's. Linear in k, so the
  // peak is at the last block, the one before it or the first.
  const int64_t n_layer = c.n_layer;
  auto block_backward = [&](int64_t k, const char* name) {
    PeakPoint p{name};
    state.hold_in(p);
    const double before = static_cast<double>(k);
    p.activations.add(2, b * BT * C);  // the embedding, the first input_layernorm's output
    p.activations.add(1, 4 * BT);      // ... and its 1/rms
    p.activations.add(2, 4 * BT);      // the batch
    if (o.recompute == Recompute::block) {
      p.activations.add(2 * before, b * BT * C);
      p.recompute = full_layer;
      p.recompute.add(-1, 4 * BT);
    } else {
      p.activations.add(layer, before + 1);
      p.activations.add(-2, b * BT * C);
      p.activations.add(-1, 4 * BT);
      p.recompute = rebuilt;
    }
    (o.recompute == Recompute::none ? p.activations : p.recompute).add(-1, b * BT * F);
    for (size_t i = static_cast<size_t>(6 * k + 5); i < tensors.size(); ++i)
      p.gradients.add(1, 4 * tensors[i]);
    if (c.tie_embeddings) p.gradients.add(1, 4 * V * C);  // the head's share of the table
    // The incoming gradient (below the last block: the residual's and the norm's, and dx of the
    // next block's qkv_proj), SwiGLU's output gradient and gate_up's.
    p.temporaries.add(k + 1 == n_layer ? 1 : 3, b * BT * C);
    p.temporaries.add(1, b * BT * F);
    p.temporaries.add(1, b * BT * 2 * F);
    return p;
  };
  const BlockPoints blocks = block_points(n_layer, o.recompute, block_backward);
  return budget_at_highest({&head, &blocks.last, &blocks.before_last, &blocks.first, &end});
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
  const BudgetClassesScope classes(options.size_classes);
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
