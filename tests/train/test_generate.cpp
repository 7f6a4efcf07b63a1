// Generation: the sampling rule on hand-made logits, and the KV cache against the full context,
// for GPT-2 and for a llama with grouped-query attention. The full-context path is the model's
// ordinary forward over the window (its attention kernel); the cache path is a different
// computation (nn/gpt_decoder.cpp, nn/llama_decoder.cpp: one position at a time, attention over
// the cached keys by plain matmul and softmax), so agreement is a real check of the cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "autograd/ops.h"
#include "engine/allocator.h"
#include "engine/rng.h"
#include "nn/kv_cache.h"  // host_f32
#include "train/generate.h"
#include "train_testing.h"

namespace glass::train {
namespace {

TEST(SampleToken, InverseCdfTemperatureAndTopK) {
  // p = (1/4, 3/4): u below 1/4 draws 0, above draws 1.
  const std::vector<float> two = {0.0f, static_cast<float>(std::log(3.0))};
  SamplingOptions o;
  EXPECT_EQ(sample_token(two, o, 0.24), 0);
  EXPECT_EQ(sample_token(two, o, 0.26), 1);
  // Temperature 0.5 squares the odds: p = (1/10, 9/10).
  o.temperature = 0.5;
  EXPECT_EQ(sample_token(two, o, 0.09), 0);
  EXPECT_EQ(sample_token(two, o, 0.11), 1);
  // Temperature 0: the most likely, whatever u.
  o.temperature = 0;
  EXPECT_EQ(sample_token({1, 5, 3, 5}, o, 0.0), 1);  // ties: the lower id
  // top-k 2 of (0, 3, 1, 2): only ids 1 and 3 are candidates, p = (e/(1+e), 1/(1+e)) in id order.
  o = {};
  o.top_k = 2;
  const std::vector<float> four = {0, 3, 1, 2};
  const double p1 = std::exp(1.0) / (1 + std::exp(1.0));
  EXPECT_EQ(sample_token(four, o, p1 - 0.01), 1);
  EXPECT_EQ(sample_token(four, o, p1 + 0.01), 3);
  EXPECT_EQ(sample_token(four, o, 0.999999), 3);
  o.top_k = 1;
  EXPECT_EQ(sample_token(four, o, 0.999), 1);
}

// The rule sample_token documents, written the plain way: every id sorted by logit (stable: ties
// keep the lower id first), the first top_k kept and put back in id order, the CDF in id order.
// sample_token selects the top k without sorting the vocabulary; it must draw the same ids.
int32_t sample_by_full_sort(const std::vector<float>& logits, const SamplingOptions& o, double u) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (o.temperature == 0) return order[0];
  const auto k =
      static_cast<size_t>(o.top_k == 0 ? logits.size() : std::min<size_t>(o.top_k, logits.size()));
  order.resize(k);
  std::sort(order.begin(), order.end());
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> w(k);
  double sum = 0;
  for (size_t j = 0; j < k; ++j) sum += w[j] = std::exp((logits[order[j]] - max) / o.temperature);
  double acc = 0;
  for (size_t j = 0; j < k; ++j) {
    acc += w[j] / sum;
    if (u < acc) return order[j];
  }
  return order.back();
}

TEST(SampleToken, TopKWithoutSortingDrawsWhatTheFullSortDraws) {
  // logits with many ties (values on a coarse grid), a vocabulary of GPT-2's size and small ones
  for (const int64_t V : {1, 2, 7, 65, 50257}) {
    std::vector<float> logits(static_cast<size_t>(V));
    for (int64_t i = 0; i < V; ++i)
      logits[static_cast<size_t>(i)] =
          static_cast<float>(std::round(4 * philox_normal(11, 0, static_cast<uint64_t>(i))) / 2);
    for (const SamplingOptions& o :
         {SamplingOptions{1.0, 0, 0}, SamplingOptions{0.7, 1, 0}, SamplingOptions{0.7, 3, 0},
          SamplingOptions{1.3, 40, 0}, SamplingOptions{1.0, V, 0}, SamplingOptions{1.0, V + 5, 0},
          SamplingOptions{0.0, 0, 0}, SamplingOptions{0.0, 10, 0}})
      for (int draw = 0; draw < (V > 1000 ? 4 : 25); ++draw) {
        const double u = philox_uniform(5, static_cast<uint64_t>(V), static_cast<uint64_t>(draw));
        ASSERT_EQ(sample_token(logits, o, u), sample_by_full_sort(logits, o, u))
            << "V " << V << " temperature " << o.temperature << " top-k " << o.top_k << " u " << u;
      }
  }
}

// A tiny character model (GPT-2, or a llama with 2 key/value heads for 4 query heads) trained a
// few steps, so that its distributions are not flat.
Trainer& trained(Device device, const std::string& arch = "gpt2") {
  static std::map<std::string, std::unique_ptr<Trainer>> trainers;
  auto& t = trainers[device.str() + "/" + arch];
  if (!t) {
    TrainOptions o = testing::tiny_options();
    o.device = device.str();
    o.dropout = 0;
    o.arch = arch;
    if (arch == "llama") {
      o.n_head = 4;
      o.n_kv_head = 2;
    }
    o.steps = device == kCPU ? 25 : 4;  // emu is slow; its model only needs to be the cpu's kind
    o.lr = 1e-2;
    t = std::make_unique<Trainer>(o);
    while (t->step() < o.steps) t->train_step();
  }
  return *t;
}

// Every position's logits from the cache (prefill, then steps) equal those of the full forward.
// With bf16 compute copies (as a --dtype bf16 model samples) both read the same bf16 weights, but
// the cache's few-row products sum in another order than the full forward's GEMM (the GEMV path),
// so a bf16 result may round the other way: each logit (a bf16 value, 2^-8 apart near 1) within
// kBf16Logits (1 + |logit|), a few such steps.
constexpr double kBf16Logits = 0.02;
void expect_cache_logits_match(Device device, const std::string& arch = "gpt2",
                               DType dtype = DType::f32) {
  Trainer& t = trained(device, arch);
  CausalLM& model = const_cast<CausalLM&>(t.model());
  model.train(false);
  model.set_compute_dtype(dtype);
  const std::vector<int32_t> ids = t.data().vocab->encode("First Citizen:");  // 14 > block_size 12
  const int64_t T = model.config.block_size, V = model.config.vocab_size;
  ASSERT_EQ(T, 12);
  const std::vector<int32_t> window(ids.begin(), ids.begin() + T);
  std::vector<float> full;
  {
    NoGradGuard no_grad;
    full = host_f32(model.forward(from_vector(window, {1, T}, device)));
  }
  const double tolerance = dtype == DType::f32 ? 1e-5 : kBf16Logits;
  const std::unique_ptr<Decoder> decoder = model.decoder();
  for (int64_t n = 1; n <= T; ++n) {
    const std::vector<float> got =
        n <= 3 ? decoder->prefill(std::vector<int32_t>(window.begin(), window.begin() + n))
               : decoder->step(window[static_cast<size_t>(n - 1)]);
    ASSERT_EQ(decoder->pos(), n);
    for (int64_t v = 0; v < V; ++v) {
      const float want = full[static_cast<size_t>((n - 1) * model.config.table_rows() + v)];
      const float logit = got[static_cast<size_t>(v)];
      ASSERT_NEAR(logit, want, tolerance * (1 + std::fabs(want)))
          << dtype_name(dtype) << " position " << n - 1 << " class " << v;
      if (dtype == DType::bf16)  // the bf16 path ran: every logit is a bf16 value
        ASSERT_EQ(bf16::from_float(logit).to_float(), logit) << "position " << n - 1;
    }
  }
  EXPECT_THROW(decoder->step(0), Error);  // past block_size
  model.set_compute_dtype(DType::f32);
  model.train(true);
}

TEST(KvCache, LogitsOfEveryPositionMatchTheFullForwardOnCpu) {
  expect_cache_logits_match(kCPU);
  expect_cache_logits_match(kCPU, "gpt2", DType::bf16);
}

TEST(KvCache, LogitsOfEveryPositionMatchTheFullForwardOnEmu) {
  expect_cache_logits_match(Device::parse("emu"));
}

TEST(KvCache, LlamaLogitsOfEveryPositionMatchTheFullForward) {
  expect_cache_logits_match(kCPU, "llama");
  expect_cache_logits_match(kCPU, "llama", DType::bf16);
  expect_cache_logits_match(Device::parse("emu"), "llama");
}

void expect_kv_samples_match_full_context(const std::string& arch) {
  Trainer& t = trained(kCPU, arch);
  CausalLM& model = const_cast<CausalLM&>(t.model());
  const std::vector<int32_t> prompt = t.data().vocab->encode("ROMEO:");
  for (const SamplingOptions& o :
       {SamplingOptions{1.0, 0, 7}, SamplingOptions{0.8, 5, 8}, SamplingOptions{0.0, 0, 9}}) {
    // 40 tokens with block_size 12: the window fills and then slides (re-prefilled each token).
    const Generation kv = generate(model, prompt, 40, o, true);
    const Generation full = generate(model, prompt, 40, o, false);
    EXPECT_EQ(kv.tokens, full.tokens) << "temperature " << o.temperature << " top-k " << o.top_k;
    EXPECT_EQ(kv.tokens.size(), 40u);
    EXPECT_EQ(generate(model, prompt, 40, o, true).tokens, kv.tokens);  // deterministic
  }
  // Another seed draws other tokens.
  EXPECT_NE(generate(model, prompt, 40, {1.0, 0, 7}, true).tokens,
            generate(model, prompt, 40, {1.0, 0, 70}, true).tokens);
  EXPECT_TRUE(model.is_training());  // generation restores the mode
}

TEST(KvCache, SamplesExactlyTheTokensOfFullContextSampling) {
  expect_kv_samples_match_full_context("gpt2");
}

TEST(KvCache, LlamaSamplesExactlyTheTokensOfFullContextSampling) {
  expect_kv_samples_match_full_context("llama");
}

TEST(KvCache, TrainerSampleDecodesWithTheDataTokenizer) {
  Trainer& t = trained(kCPU);
  const Trainer::Sample s = t.sample(30, 5);
  EXPECT_EQ(s.generation.tokens.size(), 30u);
  EXPECT_EQ(s.text, t.data().vocab->decode(s.generation.tokens));
  EXPECT_EQ(s.text.size(), 30u);
  EXPECT_GT(s.generation.tokens_per_s(), 0);
}

// A long generation with the KV cache allocates nothing after its first token: the prompt's
// prefill allocates the cache (every layer's keys and values for block_size positions) and the
// step's buffers, and every later token writes into them. Counted by the cpu allocator's
// requests (cache hits included) and its calls to malloc, for GPT-2 and a llama with
// grouped-query attention, in f32 and with bf16 compute copies (as a --dtype bf16 model samples:
// its products keep their f32 scratch per thread).
void expect_no_allocations_after_the_first_token(Arch arch, DType dtype) {
  GPTConfig config{65, 96, 2, 4, 64, 0};
  config.arch = arch;
  if (arch == Arch::llama) config.n_kv_head = 2;
  Generator gen(3);
  const std::unique_ptr<CausalLM> model = make_model(config);
  model->init(gen);
  model->train(false);
  model->set_compute_dtype(dtype);
  const Allocator& cpu = Allocator::for_device(kCPU);
  const std::unique_ptr<Decoder> decoder = model->decoder();
  std::vector<float> logits = decoder->prefill({1, 2, 3});
  const SamplingOptions o{1.0, 10, 1};
  const auto next = [&](int64_t i) {
    return sample_token(std::vector<float>(logits.begin(), logits.begin() + config.vocab_size), o,
                        philox_uniform(o.seed, 0, static_cast<uint64_t>(i)));
  };
  logits = decoder->step(next(0));  // the first token
  const AllocatorStats before = cpu.stats();
  for (int64_t i = 1; decoder->pos() < config.block_size; ++i) logits = decoder->step(next(i));
  const AllocatorStats after = cpu.stats();
  EXPECT_EQ(after.alloc_count, before.alloc_count)
      << arch_name(arch) << " " << dtype_name(dtype) << ": requests per token";
  EXPECT_EQ(after.device_malloc_count, before.device_malloc_count) << arch_name(arch);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes) << arch_name(arch);
  // Through generate(): 90 tokens ask the allocator for exactly what 2 tokens ask (the prompt's).
  const auto requests_of = [&](int64_t n) {
    const int64_t start = cpu.stats().alloc_count;
    generate(*model, {1, 2, 3}, n, o, true);
    return cpu.stats().alloc_count - start;
  };
  EXPECT_EQ(requests_of(90), requests_of(2)) << arch_name(arch) << " " << dtype_name(dtype);
}

TEST(KvCache, NoAllocationsAfterTheFirstToken) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    expect_no_allocations_after_the_first_token(Arch::gpt2, dtype);
    expect_no_allocations_after_the_first_token(Arch::llama, dtype);
  }
}

}  // namespace
}  // namespace glass::train
