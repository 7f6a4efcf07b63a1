// Fuzz target: GPT weights as `train_gpt --init FILE` reads them (nn/gpt_weights.h): llm.c's
// checkpoint (int32[256] header, f32 or bf16 parameters), llama2.c's (int32[7] header, f32),
// Hugging Face's GPT-2 safetensors (Conv1D weights, with or without "transformer.") and Llama
// safetensors (q/k/v split), and glass's own safetensors with its "config" metadata; then what
// --init does with weights that load: build the GPT they describe (one head where the file does not
// say) and load them into it.
#include "engine/error.h"
#include "engine/rng.h"
#include "fuzz_input.h"
#include "nn/causal_lm.h"
#include "nn/gpt_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "init_weights.bin");
  try {
    const glass::GPTWeights w = glass::load_gpt_weights(path);
    glass::GPTConfig config = w.config;
    if (config.n_head == 0 || config.block_size == 0) {
      // What the flags give where the file does not say (--n-head; a llama's block size), checked
      // against the tensors again (a llama's n_kv_head follows from its qkv rows).
      if (config.n_head == 0) config.n_head = 1;
      if (config.block_size == 0) config.block_size = 1;
      config = glass::config_of_weights(w.state, config, w.path);
    }
    config.validate();
    glass::Generator gen(1);
    const auto model = glass::make_model(config, gen);  // a GPT or a Llama, as config.arch says
    model->load_state_dict(w.state);
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
