#include "nn/causal_lm.h"

#include "engine/device_runtime.h"
#include "nn/gpt.h"
#include "nn/llama.h"

namespace glass {

namespace {
// Validates before any member is built, so that a bad config gives its own error first.
const GPTConfig& validated(const GPTConfig& c) {
  c.validate();
  return c;
}
}  // namespace

CausalLM::CausalLM(const GPTConfig& config) : config(validated(config)) {}

void CausalLM::check_ids(const Tensor& ids, const char* who) const {
  GLASS_CHECK(ids.defined() && ids.dtype() == DType::i32 && ids.dim() == 2,
              "{}: token ids must be i32 [B, T], got {}", who, ids.describe());
  const int64_t T = ids.size(1);
  GLASS_CHECK(T >= 1 && T <= config.block_size,
              "{}: sequence length T={} must be in [1, block_size={}] (ids {})", who, T,
              config.block_size, ids.describe());
}

Tensor CausalLM::loss(const Tensor& logits, const Tensor& targets) const {
  const int64_t rows = targets.numel(), columns = config.table_rows();
  GLASS_CHECK(logits.dim() >= 1 && logits.size(-1) == columns && logits.numel() == rows * columns,
              "loss: logits {} must hold one row of {} logits per target of {}", logits.describe(),
              columns, targets.describe());
  const Tensor flat = view(logits, {rows, columns}), flat_targets = view(targets, {rows});
  // emu and cuda (and meta, which plans their launches): the fused classifier, in f32 or bf16
  // (the loss in f32 either way).
  if (capabilities(loss_device_.value_or(logits.device())).fused_classifier)
    return fused_classifier(flat, flat_targets, config.vocab_size);
  // The reference path: softmax over the class columns only.
  const Tensor classes = columns == config.vocab_size ? flat : slice(flat, 1, 0, config.vocab_size);
  return cross_entropy(classes, flat_targets);
}

std::unique_ptr<CausalLM> make_model(const GPTConfig& config, Generator& dropout_gen) {
  if (config.arch == Arch::llama) return std::make_unique<Llama>(config, dropout_gen);
  return std::make_unique<GPT>(config, dropout_gen);
}

}  // namespace glass
