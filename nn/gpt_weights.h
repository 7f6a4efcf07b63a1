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
//          in llm.c's order, f32 (version 3) or bf16 (version 5). GPT-2 only.
//   llama2c  llama2.c's legacy checkpoint (nn/llama2c_weights.h): int32[7] header, then the
//          weights in run.c's order, f32, q and k rows in its RoPE order; a tokenizer.bin beside it
//          (nn/llama2c_tokenizer.h). Llama only.
//
// A llama (GPTConfig::arch llama) is held in glass's llama names (nn/llama_state.h): the glass
// layout is those names; hf is Hugging Face's LlamaForCausalLM with a config.json beside it
// (nn/hf_llama_weights.h). Every layout is converted to and from glass's state dict (names and
// shapes of GPT's named_parameters()), so a model loaded from any of them is the same model.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "nn/gpt.h"

namespace glass {

enum class WeightLayout { glass, hf, llmc, llama2c };

// "glass" | "hf" | "llmc" | "llama2c", or an error listing them.
WeightLayout parse_weight_layout(const std::string& name);
const char* weight_layout_name(WeightLayout layout);
// Refuses a layout that cannot hold `arch`'s weights (llmc: GPT-2 only; llama2c: llama only), with
// an error naming both: train_gpt checks --save-format with it before training.
void check_layout_holds(WeightLayout layout, Arch arch);

// A GPT's weights as read from a file, in glass's names and shapes, on the host, in the file's
// dtype (load_state_dict casts bf16 to the f32 masters).
struct GPTWeights {
  std::string path;
  WeightLayout layout = WeightLayout::glass;
  NamedTensors state;
  // The shape, from the tensors and from what the file says beyond them: llm.c's and llama2.c's
  // headers hold all of it; glass's metadata holds n_head, the padded vocabulary and a llama's
  // fields; a Hugging Face llama's config.json beside the file holds them too. n_head (and a
  // llama's n_kv_head) is 0 where the file does not say (GPT-2's Hugging Face and nanoGPT files, a
  // Hugging Face llama without config.json), and so is a llama's block_size (no shape holds it):
  // the caller sets them from its flags and calls config_of_weights(state, that, path) again,
  // which derives n_kv_head from the qkv rows and checks the result against the tensors.
  GPTConfig config;
  // The safetensors layouts' metadata (e.g. "tokenizer", which train_gpt --save writes); llm.c's
  // file has none.
  std::map<std::string, std::string> metadata;
};

// Reads `path` in whichever layout it is: llm.c's magic number first; then llama2.c's header when
// the size it implies is the file's; then safetensors, told apart by names (a llama's
// model.embed_tokens with qkv_proj in glass's, q_proj in Hugging Face's) and by GPT-2's c_attn
// orientation ([3C, C] in glass's, [C, 3C] in Hugging Face's); a file that is none of these is
// read as llama2.c's when it cannot be safetensors (no '{' after the 8-byte length), so that a
// damaged llama2.c header is reported as such. Errors name the file and what is wrong with it.
GPTWeights load_gpt_weights(const std::string& path);

// Writes the model's weights to `path` in `layout`, atomically (engine/atomic_file.h). llm.c's file
// holds f32 (version 3) or, with llmc_dtype bf16, bf16 (version 5). Hugging Face's layout has no
// padded vocabulary rows: wte is written with vocab_size rows. `extra_metadata` (e.g. the
// tokenizer, for samples/generate) goes into the safetensors layouts' metadata; llm.c's has none.
// A llama goes through save_llama_weights (llmc refuses it; llama2c refuses a gpt2).
void save_gpt_weights(const std::string& path, WeightLayout layout, const CausalLM& model,
                      DType llmc_dtype = DType::f32,
                      const std::map<std::string, std::string>& extra_metadata = {});

// A llama's weights (glass's llama names, any device) in `layout`: glass (the names as they are,
// the config in the metadata), hf (Hugging Face's names, vocab_size rows, and config.json written
// beside `path`), or llama2c (the checkpoint alone; the caller writes tokenizer.bin with
// save_llama2c_tokenizer(llama2c_tokenizer_path(path), pieces), nn/llama2c_tokenizer.h). Every
// file atomically.
void save_llama_weights(const std::string& path, WeightLayout layout, const NamedTensors& state,
                        const GPTConfig& config,
                        const std::map<std::string, std::string>& extra_metadata = {});

// The configuration a state dict in glass's names implies (GPT::config_from_state_dict, or for a
// llama's names llama_config_from_state_dict, nn/llama_state.h), with n_head, vocab_size and
// padded_vocab_size taken from `declared` where it has them (n_head > 0, vocab_size > 0), and
// checked against the tensors. For a llama, `declared` (when its arch is llama) also gives
// block_size, rope_theta and norm_eps, which no shape holds, and its n_kv_head, ffn_hidden and
// tie_embeddings must agree with the tensors; block_size is 0 where `declared` has none. `what`
// names the file in errors.
GPTConfig config_of_weights(const NamedTensors& state, const GPTConfig& declared,
                            const std::string& what);

// The "format" metadata of a training checkpoint (train/checkpoint.h writes it): load_gpt_weights
// takes the weights of a file whose format starts with kCheckpointFormatPrefix and leaves its
// optimizer state out; --resume reads the whole checkpoint, of exactly kCheckpointFormat.
inline constexpr std::string_view kCheckpointFormatPrefix = "glass-checkpoint-";
inline constexpr std::string_view kCheckpointFormat = "glass-checkpoint-1";

// The "config" metadata of the safetensors files glass writes (weights and checkpoints alike): the
// shape as a JSON object, {"block_size":16,"dropout":0.0,"n_embd":32,...,"arch":"gpt2"}; a llama's
// also has n_kv_head, ffn_hidden, rope_theta, norm_eps and tie_embeddings.
std::string config_metadata(const GPTConfig& config);
// Reads it back, and also the key=value form (GPTConfig::str(): "vocab_size=65 block_size=16 ...")
// of weights files glass wrote before the metadata was JSON; the form is told by a leading '{'.
// Fields missing from the key=value form are 0; the JSON form must have the five shape fields, and
// is a gpt2 without "arch" (files written before llama). An error names `what` and the text.
GPTConfig parse_config_metadata(const std::string& text, const std::string& what);

// The differences between the shape a file holds and the shape asked for, as
// "n_layer: 2 vs 12, n_embd: 32 vs 768" (empty when they agree). Sizes of 0 in `wanted` (n_head not
// given) are not compared; neither is dropout, nor rope_theta and norm_eps. The architecture is;
// for two llamas also n_kv_head (where both know n_head), ffn_hidden and tie_embeddings.
std::string shape_differences(const GPTConfig& file, const GPTConfig& wanted);

// `state` with wte (a llama's embed_tokens, and lm_head when untied) grown to `rows` rows, the new
// rows zero (a GPT-2 file of 50257 rows for the gpt2 preset's 50304). Host tensors only.
NamedTensors pad_vocab_rows(const NamedTensors& state, int64_t rows);

}  // namespace glass
