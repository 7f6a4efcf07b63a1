// generate: text from a saved model (train_gpt --save), sampled with a KV cache.
//
//   build/samples/generate --weights W.safetensors --prompt "ROMEO:" --sample 200
//                          [--temperature 0.8] [--top-k 40] [--seed 1337] [--device cpu]
//
// The model's shape comes from the weights (n_head from the file's "config" metadata, or
// --n-head); its tokenizer from the file's "tokenizer" metadata, which train_gpt writes: "char"
// (the character vocabulary is stored beside it) or "gpt2". Prints the prompt and the sample, then
// tokens/s. Errors: one line, "generate: error: ...".
#include <cstdio>
#include <CLI/CLI.hpp>
#include <regex>

#include "autograd/ops.h"
#include "engine/error.h"
#include "kernels/cpu/threads.h"
#include "nn/safetensors.h"
#include "train/data.h"
#include "train/generate.h"
#include "train/tokenizer/gpt2_tokenizer.h"

namespace {

using namespace glass;

// The n_head=... of a "config" metadata string (GPTConfig::str), or 0.
int64_t n_head_of(const std::map<std::string, std::string>& metadata) {
  const auto c = metadata.find("config");
  std::smatch m;
  if (c == metadata.end() || !std::regex_search(c->second, m, std::regex("n_head=(\\d+)")))
    return 0;
  return std::stoll(m[1]);
}

std::unique_ptr<train::Tokenizer> tokenizer_of(const std::map<std::string, std::string>& metadata,
                                               std::string kind, const std::string& data) {
  if (kind.empty()) {
    const auto t = metadata.find("tokenizer");
    GLASS_CHECK(t != metadata.end(),
                "the weights do not say their tokenizer (no \"tokenizer\" metadata): pass "
                "--tokenizer char --data TEXT or --tokenizer gpt2");
    kind = t->second;
  }
  if (kind == "gpt2")
    return std::make_unique<train::Gpt2Tokenizer>(
        train::Gpt2Tokenizer::from_dir(train::Gpt2Tokenizer::default_dir()));
  GLASS_CHECK(kind == "char", "tokenizer '{}': expected char or gpt2", kind);
  if (!data.empty()) return std::make_unique<train::CharVocab>(*train::load_text(data).vocab);
  const auto chars = metadata.find("char_vocab");
  GLASS_CHECK(chars != metadata.end(),
              "a character model's weights without \"char_vocab\" metadata: pass --data TEXT (the "
              "text it was trained on)");
  return std::make_unique<train::CharVocab>(train::char_vocab_from_metadata(chars->second));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"generate: sample text from a saved glass GPT"};
  std::string weights, device_name = "cpu", tokenizer, data, prompt;
  int64_t n_head = 0, n = 200;
  int threads = 0;
  bool full_context = false;
  train::SamplingOptions s;
  app.add_option("--weights", weights, "model weights (.safetensors, train_gpt --save)")
      ->required();
  app.add_option("--device", device_name, "cpu | emu | cuda[:N]");
  app.add_option("--n-head", n_head, "attention heads (default: the file's config metadata)");
  app.add_option("--tokenizer", tokenizer, "char | gpt2 (default: the file's metadata)");
  app.add_option("--data", data, "the text a character model was trained on (its vocabulary)");
  app.add_option("--prompt", prompt, "text to continue (default: a new line/document)");
  app.add_option("--sample", n, "tokens to generate");
  app.add_option("--temperature", s.temperature, "sampling temperature (0 = most likely token)");
  app.add_option("--top-k", s.top_k, "sample among the k most likely tokens (0 = all)");
  app.add_option("--seed", s.seed, "seed of the sampling");
  app.add_option("--threads", threads, "cpu threads (0 = all cores)");
  app.add_flag("--full-context", full_context,
               "re-run the whole context for every token instead of using the KV cache");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "generate: error: {} (see --help)\n", e.what());
    return 2;
  }
  try {
    kernels::cpu::set_threads(threads);
    const Device device = Device::parse(device_name);
    SafeTensorsFile file = load_safetensors(weights, device);
    if (n_head == 0) n_head = n_head_of(file.metadata);
    GLASS_CHECK(n_head > 0, "{}: no n_head in its \"config\" metadata: pass --n-head", weights);
    const auto tok = tokenizer_of(file.metadata, tokenizer, data);
    const GPTConfig config = GPT::config_from_state_dict(file.tensors, n_head);
    config.validate();
    GLASS_CHECK(tok->vocab_size() <= config.vocab_size,
                "the {} tokenizer has {} tokens, more than the model's {} classes", tok->name(),
                tok->vocab_size(), config.vocab_size);
    GPT model(config);
    model.to(device);
    model.load_state_dict(file.tensors);
    std::vector<int32_t> context = tok->encode(prompt);
    if (context.empty()) {
      // A new document (GPT-2) or a new line (characters; the first one when there is none).
      const auto* chars = dynamic_cast<const train::CharVocab*>(tok.get());
      const auto newline = chars ? chars->chars().find('\n') : std::string::npos;
      context = {chars ? static_cast<int32_t>(newline == std::string::npos ? 0 : newline) : 50256};
    }
    const train::Generation g = train::generate(model, context, n, s, !full_context);
    fmt::print("{}{}\n", prompt, tok->decode(g.tokens));
    std::fflush(stdout);  // the text before the summary line on stderr, also through one pipe
    fmt::print(stderr, "generate: {} tokens in {:.3f} s: {:.1f} tokens/s ({})\n", g.tokens.size(),
               g.seconds, g.tokens_per_s(), full_context ? "full context" : "KV cache");
  } catch (const std::exception& e) {
    fmt::print(stderr, "generate: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
