// Text generation from a GPT: sampling the next token from the logits, and the generation loop,
// with a KV cache (nn/gpt_decoder.h) or by re-running the whole context for every token.
//
// The context is the last block_size tokens, as in nanoGPT. With the cache, a new token costs one
// position's forward while the context fits; once it is longer than block_size the window slides
// by one every token, and each token re-runs the window (a prefill), as the full context does.
// Both ways draw token i from the same uniform number, philox_uniform(seed, 0, i), so for one seed
// they give the same tokens (up to ties of rounding in the logits) and each is deterministic.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/gpt.h"

namespace glass::train {

struct SamplingOptions {
  double temperature = 1.0;  // logits / temperature; 0 = always the most likely token
  int64_t top_k = 0;         // draw among the k most likely tokens only (0 = all)
  uint64_t seed = 1337;
};

// Throws naming the flag (--temperature, --top-k) whose value sampling cannot use. sample_token
// checks its options with it; train_gpt checks them at start-up, before any training.
void check_sampling_options(const SamplingOptions& options);

// The token drawn from softmax(logits / temperature) restricted to the top_k largest logits
// (ties: the lower id first), by inverse CDF at u in [0, 1): the first id, in id order, where the
// cumulative probability exceeds u. `logits` holds the classes only (no padded columns). The
// vocabulary is never sorted: one pass finds the most likely id, a partial selection
// (nth_element, O(V)) the top_k, and only those k are sorted into id order.
int32_t sample_token(const std::vector<float>& logits, const SamplingOptions& options, double u);

struct Generation {
  std::vector<int32_t> tokens;  // the new tokens (the context not included)
  double seconds = 0;           // generation time, prompt included
  double tokens_per_s() const {
    return seconds > 0 ? static_cast<double>(tokens.size()) / seconds : 0;
  }
};

// `n` new tokens after `context` (at least one token). The model is put in eval mode while it runs.
Generation generate(CausalLM& model, const std::vector<int32_t>& context, int64_t n,
                    const SamplingOptions& options, bool kv_cache = true);

}  // namespace glass::train
