// llm.c's GPT-2 checkpoint file (llm.c's train_gpt2.c reads it, its train_gpt2.py writes it).
//
//   int32 header[256]: [0] magic 20240326, [1] version (3: f32 parameters, 5: bf16), [2] max T,
//                      [3] V, [4] L, [5] H, [6] C, [7] padded V; the rest zero
//   then the parameters, back to back, each group holding all L layers:
//     wte [Vp, C], wpe [maxT, C], ln_1.weight [L, C], ln_1.bias [L, C],
//     attn.c_attn.weight [L, 3C, C], attn.c_attn.bias [L, 3C], attn.c_proj.weight [L, C, C],
//     attn.c_proj.bias [L, C], ln_2.weight [L, C], ln_2.bias [L, C], mlp.c_fc.weight [L, 4C, C],
//     mlp.c_fc.bias [L, 4C], mlp.c_proj.weight [L, C, 4C], mlp.c_proj.bias [L, C],
//     ln_f.weight [C], ln_f.bias [C]
// Matrices are [out, in], as glass's (and nn.Linear's); the padded rows of wte are never read.
#pragma once

#include <string>
#include <string_view>

#include "nn/gpt_weights.h"

namespace glass {

constexpr int32_t kLlmcMagic = 20240326;
constexpr int32_t kLlmcVersionF32 = 3, kLlmcVersionBF16 = 5;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

// True when `bytes` starts with llm.c's magic number (enough to pick this parser).
bool looks_like_llmc(std::string_view bytes);

// Parses a whole llm.c checkpoint held in memory. The header is validated (magic, version, sizes
// positive, C divisible by H, Vp >= V) and the parameter count it implies is checked against the
// bytes that follow before anything is allocated; errors name `name` and the header field or byte
// offset at fault.
GPTWeights parse_llmc_weights(std::string_view bytes, const std::string& name);

// The file for `model`, parameters in f32 (version 3) or bf16 (version 5).
std::string llmc_weights_bytes(const CausalLM& model, DType dtype);

}  // namespace glass
