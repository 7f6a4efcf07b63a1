// llama2.c's legacy checkpoint (the file its run.c samples from), converted to and from glass's
// llama state dict (nn/llama_state.h).
//
//   int32 header[7]: dim C, hidden_dim F, n_layers L, n_heads H, n_kv_heads Hkv, vocab_size V
//                    (negative when the classifier is not shared with the embedding), seq_len T
//   then f32, back to back, each group holding all L layers:
//     token_embedding_table [V, C], rms_att_weight [L, C], wq [L, H D, C], wk [L, Hkv D, C],
//     wv [L, Hkv D, C], wo [L, C, H D], rms_ffn_weight [L, C], w1 (gate) [L, F, C],
//     w2 (down) [L, C, F], w3 (up) [L, F, C], rms_final_weight [C],
//     freq_cis_real [T, D/2], freq_cis_imag [T, D/2]  (cos and sin of t * theta^(-2j/D); run.c
//                                                       skips them and computes its own),
//     wcls [V, C]  (only when not shared)
//
// RoPE's pairs differ: llama2.c rotates adjacent dimensions (2j, 2j+1) of each head, Hugging Face
// and glass the two halves (j, j + D/2), both at frequency theta^(-2j/D). A q or k row that is
// dimension j of a head in glass's order is therefore row 2j of that head in llama2.c's, and
// dimension j + D/2 is row 2j + 1: the rows are interleaved on the way out and de-interleaved on
// the way in, so that both files compute the same attention scores. The file has vocabulary rows
// only (no padding) and no rope_theta or eps: run.c's are 10000 and 1e-5.
#pragma once

#include <string>
#include <string_view>

#include "nn/gpt_weights.h"

namespace glass {

constexpr size_t kLlama2cHeaderBytes = 7 * sizeof(int32_t);

// True when `bytes` (the file's first bytes) and its size are a llama2.c checkpoint: a header
// of plausible sizes whose implied length is exactly `file_size`, the classifier shared or not.
bool looks_like_llama2c(std::string_view prefix, uint64_t file_size);

// Parses a whole llama2.c checkpoint held in memory. The header is validated field by field
// (positive, C divisible by H, H divisible by Hkv, an even head dim) and the bytes it implies are
// checked against the file's before anything is allocated; errors name `name` and the header
// field, or both sizes.
GPTWeights parse_llama2c_weights(std::string_view bytes, const std::string& name);

// The file for a llama's state dict (glass's names, any device, f32 or bf16: written f32).
std::string llama2c_weights_bytes(const NamedTensors& state, const GPTConfig& config);

// A head-major block of q or k rows ([heads * D, C]) from glass's (rotate-half) order to
// llama2.c's (adjacent pairs), and back: row h D + j <-> h D + 2j, row h D + j + D/2 <-> h D + 2j
// + 1.
Tensor rows_to_interleaved_rope(const Tensor& w, int64_t heads);
Tensor rows_from_interleaved_rope(const Tensor& w, int64_t heads);

}  // namespace glass
