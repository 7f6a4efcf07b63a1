// CausalLM: what every architecture glass trains is to the trainer, the sampler and the cost
// model: a Module that maps token ids to next-token logits, built from a GPTConfig.
//
//   gpt2   nn/gpt.h    (GPT-2 / nanoGPT names: transformer.wte, transformer.h.{i}.*, ...)
//   llama  nn/llama.h  (Hugging Face's Llama names: model.embed_tokens, model.layers.{i}.*, ...)
//
// make_model(config) builds the one config.arch asks for. The loss (mean cross-entropy over the
// classes [0, vocab_size) of possibly padded logits) is the same for both.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "autograd/ops.h"
#include "nn/gpt_config.h"
#include "nn/module.h"
#include "nn/recompute.h"

namespace glass {

// A model's forward for generation with a KV cache (nn/gpt_decoder.h, nn/llama_decoder.h).
class Decoder {
 public:
  virtual ~Decoder() = default;
  // Forgets the cache, then runs `ids` at positions 0..n-1 (1 <= n <= block_size); returns the
  // last position's logits, f32 [table_rows()], on the host.
  virtual std::vector<float> prefill(const std::vector<int32_t>& ids) = 0;
  // Runs one token at position pos() (< block_size) and returns its logits.
  virtual std::vector<float> step(int32_t id) = 0;
  // Positions in the cache.
  int64_t pos() const { return pos_; }

 protected:
  int64_t pos_ = 0;
};

class CausalLM : public Module {
 public:
  // Validates `config` (GPTConfig::validate) before anything is built.
  explicit CausalLM(const GPTConfig& config);

  // The initialisation of the architecture, drawn from `gen` in parameter order (deterministic
  // for a seed).
  virtual void init(Generator& gen) = 0;
  // The kernel behind every block's causal attention (autograd/ops.h: AttentionKernel).
  virtual void set_attention(AttentionKernel kernel) = 0;
  // Which activations each block recomputes in backward instead of keeping (nn/recompute.h).
  virtual void set_recompute(Recompute mode) = 0;
  // ids i32 [B, T] with 1 <= T <= block_size -> logits [B, T, table_rows()] (classes first).
  virtual Tensor forward(const Tensor& ids) const = 0;
  // The token embedding table [table_rows(), C]: where the model lives.
  virtual const Tensor& token_embedding() const = 0;
  // A KV-cache decoder over this model (which must outlive it).
  virtual std::unique_ptr<Decoder> decoder() const = 0;

  // The mean cross-entropy of logits [B, T, table_rows()] against targets i32 [B, T], over the
  // classes [0, vocab_size). On emu and cuda (and meta, which plans their launches) the fused
  // classifier (autograd/classifier.cpp), which consumes the logits; on cpu the reference:
  // cross_entropy of the logits' class columns.
  Tensor loss(const Tensor& logits, const Tensor& targets) const;
  // The loss as on `device` (its capabilities' fused_classifier), whatever device the logits are
  // on: a plan on meta of a cpu run (train/step_plan.h) takes cpu's cross-entropy.
  void set_loss_as_on(Device device) { loss_device_ = device; }

  Device device() const { return token_embedding().device(); }

  const GPTConfig config;

 protected:
  // Checks ids i32 [B, T] with 1 <= T <= block_size; `who` names the model in the error.
  void check_ids(const Tensor& ids, const char* who) const;

 private:
  std::optional<Device> loss_device_;  // set_loss_as_on
};

// The model config.arch names, with dropout layers drawing from `dropout_gen`.
std::unique_ptr<CausalLM> make_model(const GPTConfig& config,
                                     Generator& dropout_gen = default_generator());

}  // namespace glass
