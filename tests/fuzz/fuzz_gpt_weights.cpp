// Fuzz target: GPT weights as `train_gpt --init FILE` reads them (nn/gpt_weights.h): llm.c's
// checkpoint (int32[256] header, f32 or bf16 parameters), Hugging Face's GPT-2 safetensors (Conv1D
// weights, with or without "transformer."), and glass's own safetensors with its "config"
// metadata; then what --init does with weights that load: build the GPT they describe (one head
// where the file does not say) and load them into it.
#include "engine/error.h"
#include "engine/rng.h"
#include "fuzz_input.h"
#include "nn/gpt_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = glass::fuzz::write_input(data, size, "init_weights.bin");
  try {
    const glass::GPTWeights w = glass::load_gpt_weights(path);
    glass::GPTConfig config = w.config;
    if (config.n_head == 0) config.n_head = 1;  // --n-head's default role (train_gpt)
    config.validate();
    glass::Generator gen(1);
    glass::GPT model(config, gen);
    model.load_state_dict(w.state);
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
