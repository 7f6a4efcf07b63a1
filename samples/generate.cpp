// generate: text from a saved model, sampled with a KV cache.
//
//   build/samples/generate --weights W --prompt "ROMEO:" --sample 200
//                          [--temperature 0.8] [--top-k 40] [--seed 1337] [--device cpu]
//                          [--dtype bf16]
//
// W is any layout train_gpt --init reads (nn/gpt_weights.h): glass safetensors (train_gpt --save,
// or a training checkpoint), Hugging Face's GPT-2 or Llama safetensors (a llama's config.json
// beside it), llm.c's checkpoint file, or llama2.c's (its tokenizer.bin beside it decodes). The
// model's shape comes from the weights; n_head from the file (glass's "config" metadata, llm.c's
// header) or --n-head (Hugging Face files keep it in a separate config.json). The tokenizer comes
// from the file's "tokenizer" metadata, which train_gpt --save writes: "char" (the character
// vocabulary is stored beside it) or "gpt2"; a Hugging Face or llm.c file without it is a GPT-2
// model, so gpt2. A --data text must have the vocabulary the weights were trained on (the stored
// one, or the model's number of classes). --dtype bf16 samples through bf16 copies of the weights,
// as a `train_gpt --dtype bf16` model's forward reads them: half the bytes per token (on cpu, the
// products on AVX512-BF16 where the CPU has it). Prints the prompt and the sample, then tokens/s.
// Errors: one line, "generate: error: ...".
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>

#include "autograd/ops.h"
#include "engine/error.h"
#include "kernels/cpu/threads.h"
#include "nn/gpt_weights.h"
#include "nn/llama2c_tokenizer.h"
#include "samples/command_line.h"
#include "train/data.h"
#include "train/generate.h"
#include "train/tokenizer/gpt2_tokenizer.h"

namespace {

using namespace glass;

// --data's character vocabulary, checked against the weights': the one stored with them
// ("char_vocab") where there is one, else the model's number of classes. Another text's vocabulary
// maps the ids to other characters, and the sample would be garbage.
train::CharVocab data_vocab(const GPTWeights& weights, const std::string& data) {
  const int32_t specials = train::special_tokens(weights.config.arch);
  train::CharVocab vocab = train::load_text(data).vocab->with_specials(specials);
  const auto stored = weights.metadata.find("char_vocab");
  if (stored != weights.metadata.end()) {
    const train::CharVocab theirs = train::char_vocab_from_metadata(stored->second);
    GLASS_CHECK(vocab.chars() == theirs.chars(),
                "--data {} has a vocabulary of {} characters, but {} was trained on another one "
                "of {} (its \"char_vocab\" metadata): drop --data to use the stored one",
                data, vocab.chars().size(), weights.path, theirs.chars().size());
  }
  GLASS_CHECK(
      vocab.size() == weights.config.vocab_size,
      "--data {} has {} distinct characters{}, but the model in {} has {} classes: not the "
      "text it was trained on",
      data, vocab.chars().size(),
      specials ? fmt::format(" ({} classes with a llama's {} reserved ids)", vocab.size(), specials)
               : std::string(),
      weights.path, weights.config.vocab_size);
  return vocab;
}

// The tokenizer asked for, else the file's "tokenizer" metadata, else GPT-2's for the layouts that
// only GPT-2 models come in.
std::unique_ptr<train::Tokenizer> tokenizer_of(const GPTWeights& weights, std::string kind,
                                               const std::string& data) {
  const auto& metadata = weights.metadata;
  // llama2.c's checkpoint has no metadata: the tokenizer.bin beside it (train_gpt --save-format
  // llama2c writes one) holds its vocabulary, which glass decodes when it is one of characters.
  const std::string llama2c_vocab = llama2c_tokenizer_path(weights.path);
  if (kind.empty() && weights.layout == WeightLayout::llama2c &&
      std::filesystem::exists(llama2c_vocab))
    return std::make_unique<train::CharVocab>(train::char_vocab_from_pieces(
        load_llama2c_tokenizer(llama2c_vocab, weights.config.vocab_size).pieces));
  if (kind.empty()) {
    const auto t = metadata.find("tokenizer");
    const auto chars = metadata.find("char_vocab");
    if (t != metadata.end())
      kind = t->second;
    else if (chars != metadata.end() && !chars->second.empty())
      kind = "char";  // a training checkpoint of text data keeps its characters
    else if (weights.layout != WeightLayout::glass)
      kind = "gpt2";
    // A training checkpoint of token data says which data it was trained on, not its tokenizer.
    const auto trained_on = metadata.find("data_path");
    GLASS_CHECK(!kind.empty(),
                "the weights do not say their tokenizer (no \"tokenizer\" metadata): pass "
                "--tokenizer char --data TEXT or --tokenizer gpt2{}",
                trained_on == metadata.end()
                    ? std::string()
                    : fmt::format(" ({} was trained on {})", weights.path, trained_on->second));
  }
  if (kind == "gpt2")
    return std::make_unique<train::Gpt2Tokenizer>(
        train::Gpt2Tokenizer::from_dir(train::Gpt2Tokenizer::default_dir()));
  GLASS_CHECK(kind == "char", "tokenizer '{}': expected char or gpt2", kind);
  if (!data.empty()) return std::make_unique<train::CharVocab>(data_vocab(weights, data));
  const auto chars = metadata.find("char_vocab");
  GLASS_CHECK(chars != metadata.end(),
              "a character model's weights without \"char_vocab\" metadata: pass --data TEXT (the "
              "text it was trained on)");
  return std::make_unique<train::CharVocab>(
      train::char_vocab_from_metadata(chars->second)
          .with_specials(train::special_tokens(weights.config.arch)));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"generate: sample text from a saved glass GPT"};
  glass::samples::describe_program(
      app, "README.md (\"GPT-2 tokens: prepare_data, sampling, generate\")");
  std::string weights, device_name = "cpu", tokenizer, data, prompt, dtype = "f32";
  int64_t n_head = 0, n = 200;
  int threads = 0;
  bool full_context = false;
  train::SamplingOptions s;
  app.add_option("--weights", weights,
                 "model weights: glass (--save or a checkpoint) or Hugging Face safetensors, or "
                 "llm.c's .bin")
      ->required();
  app.add_option("--device", device_name, "cpu | emu | cuda[:N]");
  app.add_option("--dtype", dtype,
                 "f32 | bf16 (sample through bf16 copies of the weights, as a --dtype bf16 model "
                 "trains: half the bytes per token; cpu's products on AVX512-BF16 where the CPU "
                 "has it)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--n-head", n_head,
                 "attention heads (0: what the file says; Hugging Face files need it)");
  app.add_option("--tokenizer", tokenizer, "char | gpt2 (default: the file's metadata)");
  app.add_option(
      "--data", data,
      "the text a character model was trained on (its vocabulary, checked against the weights)");
  app.add_option("--prompt", prompt, "text to continue (default: a new line/document)");
  app.add_option("--sample", n, "tokens to generate");
  app.add_option("--temperature", s.temperature, "sampling temperature (0 = most likely token)");
  app.add_option("--top-k", s.top_k, "sample among the k most likely tokens (0 = all)");
  app.add_option("--seed", s.seed, "seed of the sampling");
  app.add_option("--threads", threads, "cpu threads (0 = all cores)");
  app.add_flag("--full-context", full_context,
               "re-run the whole context for every token instead of using the KV cache");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "generate"))
    return *status;
  try {
    // Before the weights load: the count would only be looked at after.
    GLASS_CHECK(n >= 0, "--sample {}: the number of tokens to generate must be >= 0", n);
    kernels::cpu::set_threads(threads);
    const Device device = Device::parse(device_name);
    const GPTWeights file = load_gpt_weights(weights);
    GPTConfig config = file.config;
    if (n_head > 0) {
      GLASS_CHECK(config.n_head == 0 || config.n_head == n_head,
                  "--n-head {} disagrees with {}, which says n_head={}", n_head, weights,
                  config.n_head);
      config.n_head = n_head;
    }
    GLASS_CHECK(config.n_head > 0, "{} ({} layout) does not say its n_head: pass --n-head", weights,
                weight_layout_name(file.layout));
    // A Hugging Face llama without its config.json: the block size is in no shape, and n_kv_head
    // follows from the qkv rows once n_head is known.
    if (config.arch == Arch::llama && file.config.n_head == 0) {
      GLASS_CHECK(config.block_size > 0,
                  "{} does not say its block size (a llama has no position table): put its "
                  "config.json (max_position_embeddings) beside it",
                  weights);
      config = config_of_weights(file.state, config, weights);
    }
    config.validate();
    const auto tok = tokenizer_of(file, tokenizer, data);
    GLASS_CHECK(tok->vocab_size() <= config.vocab_size,
                "the {} tokenizer has {} tokens, more than the model's {} classes", tok->name(),
                tok->vocab_size(), config.vocab_size);
    const std::unique_ptr<CausalLM> model = make_model(config);
    model->to(device);
    model->load_state_dict(file.state);
    if (dtype == "bf16") model->set_compute_dtype(DType::bf16);
    const std::vector<int32_t> context = train::sample_context(*tok, prompt);
    const train::Generation g = train::generate(*model, context, n, s, !full_context);
    fmt::print("{}{}\n", prompt, glass::train::without_partial_utf8_tail(tok->decode(g.tokens)));
    std::fflush(stdout);  // the text before the summary line on stderr, also through one pipe
    fmt::print(stderr, "generate: {} tokens in {:.3f} s: {:.1f} tokens/s ({}, {})\n",
               g.tokens.size(), g.seconds, g.tokens_per_s(),
               full_context ? "full context" : "KV cache", dtype);
  } catch (const std::exception& e) {
    fmt::print(stderr, "generate: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
