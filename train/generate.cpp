#include "train/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "autograd/ops.h"
#include "engine/rng.h"

namespace glass::train {

namespace {

// The logits of the last position of `window` by the ordinary forward (the whole window).
std::vector<float> full_context_logits(const CausalLM& model, const std::vector<int32_t>& window) {
  NoGradGuard no_grad;
  const auto T = static_cast<int64_t>(window.size());
  const Tensor logits = model.forward(from_vector(window, {1, T}, model.device()));
  const Tensor last = slice(view(logits, {T, -1}), 0, T - 1, T);
  return to_vector<float>(last.dtype() == DType::f32 ? last : cast(last, DType::f32));
}

// sample_token's scratch, kept between tokens: a vocabulary's worth of ids and weights.
std::vector<int32_t>& thread_local_candidates() {
  thread_local std::vector<int32_t> ids;
  return ids;
}
std::vector<double>& thread_local_weights() {
  thread_local std::vector<double> w;
  return w;
}

}  // namespace

void check_sampling_options(const SamplingOptions& options) {
  GLASS_CHECK(options.temperature >= 0, "--temperature {} must be >= 0", options.temperature);
  GLASS_CHECK(options.top_k >= 0, "--top-k {} must be >= 0", options.top_k);
}

int32_t sample_token(const std::vector<float>& logits, const SamplingOptions& options, double u) {
  GLASS_CHECK(!logits.empty(), "sample_token: no logits");
  check_sampling_options(options);
  const auto V = static_cast<int32_t>(logits.size());
  const auto logit = [&](int32_t id) { return logits[static_cast<size_t>(id)]; };
  // "a ranks before b": the larger logit, ties to the lower id. A strict total order, so the k
  // first ids under it are one set, whatever the algorithm that selects them.
  const auto before = [&](int32_t a, int32_t b) {
    return logit(a) > logit(b) || (logit(a) == logit(b) && a < b);
  };
  // The most likely id (ties: the lower), one pass: temperature 0, and the max of the softmax.
  int32_t best = 0;
  for (int32_t id = 1; id < V; ++id)
    if (before(id, best)) best = id;
  if (options.temperature == 0) return best;
  // The candidates, in id order (the CDF runs in id order): every id, or the top_k first under
  // `before`, selected in O(V) (nth_element) and only those k sorted, never the vocabulary.
  const int64_t k = options.top_k == 0 ? V : std::min<int64_t>(options.top_k, V);
  std::vector<int32_t>& candidates = thread_local_candidates();
  candidates.resize(static_cast<size_t>(V));
  std::iota(candidates.begin(), candidates.end(), 0);
  if (k < V) {
    std::nth_element(candidates.begin(), candidates.begin() + (k - 1), candidates.end(), before);
    candidates.resize(static_cast<size_t>(k));
    std::sort(candidates.begin(), candidates.end());
  }
  // p_i = exp((l_i - max) / temperature) / sum, in f64, summed in id order.
  const double max = logit(best);
  std::vector<double>& w = thread_local_weights();
  w.resize(candidates.size());
  double sum = 0;
  for (size_t j = 0; j < candidates.size(); ++j)
    sum += w[j] = std::exp((logit(candidates[j]) - max) / options.temperature);
  double acc = 0;
  for (size_t j = 0; j < candidates.size(); ++j) {
    acc += w[j] / sum;
    if (u < acc) return candidates[j];
  }
  return candidates.back();  // u just below 1 and the sum's rounding
}

Generation generate(CausalLM& model, const std::vector<int32_t>& context, int64_t n,
                    const SamplingOptions& options, bool kv_cache) {
  GLASS_CHECK(!context.empty(), "generate: the context needs at least one token");
  GLASS_CHECK(n >= 0, "generate: {} tokens", n);
  // Sampling reads every step's logits: at once, rather than after a forward, on meta.
  require_data(model.token_embedding(), "sampling (generate)");
  const auto t0 = std::chrono::steady_clock::now();
  const bool was_training = model.is_training();
  model.train(false);
  const auto T = static_cast<size_t>(model.config.block_size);
  const auto V = static_cast<size_t>(model.config.vocab_size);
  std::vector<int32_t> ids = context;
  const std::unique_ptr<Decoder> decoder = model.decoder();
  size_t cache_start = 0;  // the position in `ids` of the cache's first token
  Generation g;
  for (int64_t i = 0; i < n; ++i) {
    const size_t start = ids.size() > T ? ids.size() - T : 0;  // the window: the last T tokens
    const auto window = [&] {
      return std::vector<int32_t>(ids.begin() + static_cast<std::ptrdiff_t>(start), ids.end());
    };
    std::vector<float> logits;
    if (!kv_cache) {
      logits = full_context_logits(model, window());
    } else if (i > 0 && start == cache_start &&
               decoder->pos() + 1 == static_cast<int64_t>(ids.size() - start)) {
      logits = decoder->step(ids.back());  // the window grew by the token just drawn
    } else {
      logits = decoder->prefill(window());  // the prompt, or a window that slid
      cache_start = start;
    }
    logits.resize(V);  // the classes, without the padded columns
    const int32_t next =
        sample_token(logits, options, philox_uniform(options.seed, 0, static_cast<uint64_t>(i)));
    ids.push_back(next);
    g.tokens.push_back(next);
  }
  model.train(was_training);
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return g;
}

}  // namespace glass::train
