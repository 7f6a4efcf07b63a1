// A llama written in each weight layout (glass, Hugging Face with config.json, llama2.c) and read
// back samples the same tokens, greedy and with the KV cache: the layouts hold one model.
// (nn/gpt_weights.h; tests/nn/test_llama_weights.cpp checks the files themselves.)
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "autograd/ops.h"
#include "nn/causal_lm.h"
#include "nn/gpt_weights.h"
#include "train/generate.h"
#include "train_testing.h"

namespace glass::train {
namespace {

TEST(LlamaLayoutSamples, EachLayoutSamplesTheSameTokens) {
  const GPTConfig config{.vocab_size = 13,
                         .block_size = 24,
                         .n_layer = 2,
                         .n_head = 4,
                         .n_embd = 16,
                         .dropout = 0,
                         .padded_vocab_size = 0,
                         .arch = Arch::llama,
                         .n_kv_head = 2,
                         .ffn_hidden = 32,
                         .tie_embeddings = false};
  Generator gen(5);
  const auto model = make_model(config);
  model->init(gen);
  // Larger weights than the initialisation's, so that the greedy tokens vary.
  for (auto& [name, p] : model->named_parameters())
    if (p.dim() == 2) p.copy_from_host(contiguous(randn(p.shape(), gen, 0, 0.5)).raw_data());
  const SamplingOptions greedy{.temperature = 0, .top_k = 0, .seed = 1};
  const std::vector<int32_t> context = {1, 2, 3};
  const std::vector<int32_t> want = generate(*model, context, 16, greedy, true).tokens;
  std::set<int32_t> distinct(want.begin(), want.end());
  EXPECT_GT(distinct.size(), 2u) << "a sample of one or two tokens would compare little";
  for (WeightLayout layout : {WeightLayout::glass, WeightLayout::hf, WeightLayout::llama2c}) {
    SCOPED_TRACE(weight_layout_name(layout));
    const std::string dir =
        testing::temp_dir(std::string("llama_samples_") + weight_layout_name(layout));
    save_gpt_weights(dir + "/model.bin", layout, *model);
    const GPTWeights w = load_gpt_weights(dir + "/model.bin");
    const auto loaded = make_model(w.config);
    loaded->load_state_dict(w.state);
    EXPECT_EQ(generate(*loaded, context, 16, greedy, true).tokens, want);
  }
}

}  // namespace
}  // namespace glass::train
