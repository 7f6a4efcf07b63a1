#include "train/gpt_cost.h"

#include <cmath>

#include "engine/error.h"

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
  if (c.arch == Arch::gpt2) return 18 * C;
  const double qkv = static_cast<double>((c.n_head + 2 * c.kv_heads()) * c.head_dim());
  return 7 * C + qkv + 3 * static_cast<double>(c.ffn());
}

namespace {

// One replica's budget for `batch` rows: the model's terms (the header's list).
GptMemoryBudget replica_budget(const GPTConfig& c, int64_t batch, int64_t seq_len, DType dtype,
                               GptBudgetOptions options) {
  check_sizes(c, batch, seq_len);
  GLASS_CHECK(dtype == DType::f32 || dtype == DType::bf16,
              "GPT memory budget: dtype {} is not a training dtype (f32 or bf16)",
              dtype_name(dtype));
  const double b = static_cast<double>(dtype_size(dtype));
  const double B = static_cast<double>(batch), T = static_cast<double>(seq_len);
  const double C = static_cast<double>(c.n_embd), H = static_cast<double>(c.n_head);
  // What one layer keeps for backward, in b per token, and its f32 norm statistics per token
  // (the header's lists).
  const double kept = layer_activation_width(c), stats = c.arch == Arch::gpt2 ? 4 : 2;
  const double top_stats = c.arch == Arch::gpt2 ? 2 : 1;
  const double L = static_cast<double>(c.n_layer), V = static_cast<double>(c.table_rows());

  GptMemoryBudget m;
  m.parameters = gpt_num_parameters(c, true);
  const double N = static_cast<double>(m.parameters);
  m.parameters_bytes = b * N;
  m.gradients_bytes = b * N;
  m.master_bytes = b < 4 ? 4 * N : 0;
  m.adam_bytes = 8 * N;
  if (options.fast) {
    const double per_layer = kept * B * T + stats * B * T;  // in b, plus the f32 LSE:
    const double lse_bytes = 4 * B * H * T;
    const double top = 2 * B * T * C + top_stats * B * T + B * T * V + B * T;
    m.activations_bytes = b * (L * per_layer + top) + L * lse_bytes;
    m.temporaries_bytes = b * per_layer + lse_bytes;
    return m;
  }
  const double per_layer = kept * B * T + stats * B * T + 2 * B * H * T * T;
  const double top = 2 * B * T * C + top_stats * B * T + 2 * B * T * V + B * T;
  m.activations_bytes = b * (L * per_layer + top);
  m.temporaries_bytes = b * (B * T * V + per_layer);
  return m;
}

}  // namespace

GptMemoryBudget gpt_memory_budget(const GPTConfig& c, int64_t batch, int64_t seq_len, DType dtype,
                                  GptBudgetOptions options) {
  GLASS_CHECK(options.world >= 1, "GPT memory budget: --world {} must be at least 1",
              options.world);
  GLASS_CHECK(options.zero == 0 || options.zero == 1,
              "GPT memory budget: --zero {}: expected 0 or 1", options.zero);
  GLASS_CHECK(batch % options.world == 0,
              "GPT memory budget: --batch {} (the global batch) does not split over --world {} "
              "ranks",
              batch, options.world);
  GptMemoryBudget m = replica_budget(c, batch / options.world, seq_len, dtype, options);
  if (options.world == 1) return m;  // one rank: no buckets, nothing to shard
  const double N = static_cast<double>(m.parameters), world = static_cast<double>(options.world);
  m.gradient_buckets_bytes = 4 * N;
  if (options.zero == 1) m.adam_bytes = 8 * std::ceil(N / world);
  return m;
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
