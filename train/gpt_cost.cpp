#include "train/gpt_cost.h"

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

GptMemoryBudget gpt_memory_budget(const GPTConfig& c, int64_t batch, int64_t seq_len, DType dtype,
                                  GptBudgetOptions options) {
  check_sizes(c, batch, seq_len);
  GLASS_CHECK(dtype == DType::f32 || dtype == DType::bf16,
              "GPT memory budget: dtype {} is not a training dtype (f32 or bf16)",
              dtype_name(dtype));
  const double b = static_cast<double>(dtype_size(dtype));
  const double B = static_cast<double>(batch), T = static_cast<double>(seq_len);
  const double C = static_cast<double>(c.n_embd), H = static_cast<double>(c.n_head);
  const double L = static_cast<double>(c.n_layer), V = static_cast<double>(c.table_rows());

  GptMemoryBudget m;
  m.parameters = gpt_num_parameters(c, true);
  const double N = static_cast<double>(m.parameters);
  m.parameters_bytes = b * N;
  m.gradients_bytes = b * N;
  m.master_bytes = b < 4 ? 4 * N : 0;
  m.adam_bytes = 8 * N;
  if (options.fast) {
    const double per_layer = 18 * B * T * C + 4 * B * T;  // in b, plus the f32 LSE:
    const double lse_bytes = 4 * B * H * T;
    const double top = 2 * B * T * C + 2 * B * T + B * T * V + B * T;
    m.activations_bytes = b * (L * per_layer + top) + L * lse_bytes;
    m.temporaries_bytes = b * per_layer + lse_bytes;
    return m;
  }
  const double per_layer = 18 * B * T * C + 4 * B * T + 2 * B * H * T * T;
  const double top = 2 * B * T * C + 2 * B * T + 2 * B * T * V + B * T;
  m.activations_bytes = b * (L * per_layer + top);
  m.temporaries_bytes = b * (B * T * V + per_layer);
  return m;
}

GptStepFlops gpt_step_flops(const GPTConfig& c, int64_t batch, int64_t seq_len) {
  check_sizes(c, batch, seq_len);
  GptStepFlops f;
  f.six_n = 6 * static_cast<double>(gpt_num_parameters(c, false));
  // nn/gpt.h's estimate is 6 N' + 12 L T C: the attention term is what it adds to 6 N'.
  f.attention = gpt_flops_per_token(c, seq_len) - f.six_n;
  f.tokens = static_cast<double>(batch * seq_len);
  return f;
}

}  // namespace glass::train
