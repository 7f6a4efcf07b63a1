// KVCache: what a decoder (nn/gpt_decoder.h, nn/llama_decoder.h) keeps between tokens, and the
// kernel calls of one decoding step, made into memory allocated once.
//
// A token's step is a chain of one-row products (each weight matrix read once: the cpu GEMM's
// few-row path, kernels/cpu/gemv.cpp) and small row operations, plus attention of the new
// position over the cached keys and values:
//
//   s = q K^T * scale   [Hkv, G, P]   G = n_head / n_kv_head query heads per key/value head,
//   p = softmax(s)                    P = the positions so far (this one included)
//   y = p V             [Hkv, G, D] = [H D], the heads side by side as the model's attention
//
// as two batched GEMMs (one matrix per key/value head: its G query rows against its keys) and a
// softmax. The cache holds every layer's keys and values for block_size positions, [Hkv, T, D]
// per layer, allocated at the first prompt and reused for every token and every later prompt of
// the same shape: a token adds one row in place (no concatenation, no new memory, no page
// faults), and the scores and probabilities live in buffers sized for T positions.
// The calls go through the device's kernel table (kernels/backend.h), so a step is the same code
// on cpu, emu and cuda; they record no autograd history.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"

namespace glass {

// out [m, n] = x [m, k] @ weight^T (+ bias) with weight [n, k] (a Linear's), all contiguous: one
// GEMM launch into memory the caller owns.
void linear_into(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out);

// A row-major [rows, cols] buffer's first `rows` x `cols`, contiguous, at element `offset` of t's
// storage: how a step names a part of a buffer sized for the longest case.
Tensor rows_of(const Tensor& t, int64_t rows, int64_t cols, int64_t offset = 0);

// The rows every decoder's step writes, allocated once per dtype and device: the residual stream
// x and h (after attention), a norm's output and rstd, the heads' output, a projection's output
// and the logits (with f32 logits to read when the model computes in bf16).
struct DecoderRows {
  Tensor x, h, normed, rstd, heads, delta, logits, logits_f32;
  std::vector<float> host_logits;

  // Allocates the rows for a model of width C, heads_width = n_head head_dim and table_rows
  // logits; returns false (and allocates nothing) when they exist for this dtype and device.
  bool reserve(int64_t C, int64_t heads_width, int64_t table_rows, DType dtype, Device device);
  // logits as f32 on the host: cast on the device first when they are bf16.
  const std::vector<float>& read_logits();
};

// The last position's logits of a prompt's forward, f32 on the host (a prefill's answer).
std::vector<float> host_f32(const Tensor& logits);

class KVCache {
 public:
  // Keys and values for `layers` layers of kv_heads x positions x head_dim, and the attention's
  // scratch for n_head query heads; allocated when the geometry differs from the current one,
  // else kept as they are.
  void reserve(int64_t layers, int64_t n_head, int64_t kv_heads, int64_t positions,
               int64_t head_dim, DType dtype, Device device);

  // Positions [pos, pos + n) of `layer` from a fused qkv [n, W] (row stride W): the keys are the
  // kv_heads x head_dim columns from k_column, the values those from v_column.
  void store(int64_t layer, const Tensor& qkv, int64_t n, int64_t pos, int64_t k_column,
             int64_t v_column);

  // out [1, n_head head_dim] = softmax(q K^T * scale) V over the positions [0, positions) of
  // `layer`, q the first n_head head_dim columns of the row qkv [1, W]. Query head h reads
  // key/value head h / (n_head / kv_heads).
  void attend(int64_t layer, const Tensor& qkv, int64_t positions, double scale, const Tensor& out);

  // Storage bytes of the keys and values (all layers).
  int64_t bytes() const;

 private:
  int64_t n_head_ = 0, kv_heads_ = 0, positions_ = 0, head_dim_ = 0;
  std::vector<Tensor> keys_, values_;  // per layer [kv_heads, positions, head_dim]
  Tensor scores_, probs_;              // [n_head, positions]
};

}  // namespace glass
