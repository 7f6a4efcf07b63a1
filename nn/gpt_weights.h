// GPT weights in the layouts people have, read and written as one thing (train_gpt --init,
// --save --save-format):
//
//   glass  safetensors with nanoGPT's names and nn.Linear's [out, in] weights (what glass and
//          nanoGPT save); the metadata "config" (config_metadata()) carries n_head and the padding.
//          A training checkpoint (train/checkpoint.h) is read as this layout: its model.* tensors
//          are the weights, its optimizer state (optim.*) is left out.
//   hf     safetensors in Hugging Face's GPT-2 layout (nn/hf_weights.h): "h.N.attn.c_attn.weight"
//          as Conv1D [in, out], with or without the "transformer." prefix.
//   llmc   llm.c's checkpoint file (nn/llmc_weights.h): int32[256] header, then every parameter
//          in llm.c's order, f32 (version 3) or bf16 (version 5).
//
// Every layout is converted to and from glass's state dict (names and shapes of GPT's
// named_parameters()), so a model loaded from any of them is the same model.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "nn/gpt.h"

namespace glass {

enum class WeightLayout { glass, hf, llmc };

// "glass" | "hf" | "llmc", or an error listing them.
WeightLayout parse_weight_layout(const std::string& name);
const char* weight_layout_name(WeightLayout layout);

// A GPT's weights as read from a file, in glass's names and shapes, on the host, in the file's
// dtype (load_state_dict casts bf16 to the f32 masters).
struct GPTWeights {
  std::string path;
  WeightLayout layout = WeightLayout::glass;
  NamedTensors state;
  // The shape, from the tensors and from what the file says beyond them: llm.c's header holds all
  // of it; glass's metadata holds n_head and the padded vocabulary. n_head is 0 where the file does
  // not say (Hugging Face and nanoGPT files keep it in a separate config).
  GPTConfig config;
  // The safetensors layouts' metadata (e.g. "tokenizer", which train_gpt --save writes); llm.c's
  // file has none.
  std::map<std::string, std::string> metadata;
};

// Reads `path` in whichever layout it is: llm.c's magic number first, else safetensors, told apart
// by names and by c_attn's orientation ([3C, C] in glass's, [C, 3C] in Hugging Face's). Errors name
// the file and what is wrong with it.
GPTWeights load_gpt_weights(const std::string& path);

// Writes the model's weights to `path` in `layout`, atomically (engine/atomic_file.h). llm.c's file
// holds f32 (version 3) or, with llmc_dtype bf16, bf16 (version 5). Hugging Face's layout has no
// padded vocabulary rows: wte is written with vocab_size rows. `extra_metadata` (e.g. the
// tokenizer, for samples/generate) goes into the safetensors layouts' metadata; llm.c's has none.
void save_gpt_weights(const std::string& path, WeightLayout layout, const CausalLM& model,
                      DType llmc_dtype = DType::f32,
                      const std::map<std::string, std::string>& extra_metadata = {});

// The configuration a state dict in glass's names implies (GPT::config_from_state_dict), with
// n_head, vocab_size and padded_vocab_size taken from `declared` where it has them (n_head > 0,
// vocab_size > 0), and checked against the tensors. `what` names the file in errors.
GPTConfig config_of_weights(const NamedTensors& state, const GPTConfig& declared,
                            const std::string& what);

// The "format" metadata of a training checkpoint (train/checkpoint.h writes it): load_gpt_weights
// takes the weights of a file whose format starts with kCheckpointFormatPrefix and leaves its
// optimizer state out; --resume reads the whole checkpoint, of exactly kCheckpointFormat.
inline constexpr std::string_view kCheckpointFormatPrefix = "glass-checkpoint-";
inline constexpr std::string_view kCheckpointFormat = "glass-checkpoint-1";

// The "config" metadata of the safetensors files glass writes (weights and checkpoints alike): the
// shape as a JSON object, {"block_size":16,"dropout":0.0,"n_embd":32,...}.
std::string config_metadata(const GPTConfig& config);
// Reads it back, and also the key=value form (GPTConfig::str(): "vocab_size=65 block_size=16 ...")
// of weights files glass wrote before the metadata was JSON; the form is told by a leading '{'.
// Fields missing from the key=value form are 0; the JSON form must have the five shape fields. An
// error names `what` and the text.
GPTConfig parse_config_metadata(const std::string& text, const std::string& what);

// The differences between the shape a file holds and the shape asked for, as
// "n_layer: 2 vs 12, n_embd: 32 vs 768" (empty when they agree). Sizes of 0 in `wanted` (n_head not
// given) are not compared; neither is dropout.
std::string shape_differences(const GPTConfig& file, const GPTConfig& wanted);

// `state` with wte grown to `rows` rows, the new rows zero (a GPT-2 file of 50257 rows for the
// gpt2 preset's 50304). Host tensors only.
NamedTensors pad_vocab_rows(const NamedTensors& state, int64_t rows);

}  // namespace glass
