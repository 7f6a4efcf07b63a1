#include "nn/gpt_decoder.h"

#include <cmath>
#include <numeric>

#include "autograd/ops.h"

namespace glass {

namespace {

// The token and position embeddings of `ids` at positions start.. [1, n, C].
Tensor embed(const GPT& m, const std::vector<int32_t>& ids, int64_t start) {
  const auto n = static_cast<int64_t>(ids.size());
  const Device device = m.wte.weight.device();
  std::vector<int32_t> positions(ids.size());
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(start));
  return m.wte.forward(from_vector(ids, {1, n}, device)) +
         m.wpe.forward(from_vector(positions, {n}, device));
}

}  // namespace

std::vector<float> GPTDecoder::prefill(const std::vector<int32_t>& ids) {
  NoGradGuard no_grad;
  const GPTConfig& c = model_.config;
  const auto n = static_cast<int64_t>(ids.size());
  GLASS_CHECK(n >= 1 && n <= c.block_size, "GPTDecoder::prefill: {} tokens; 1..block_size={} fit",
              n, c.block_size);
  const int64_t C = c.n_embd, H = c.n_head, D = C / H;
  keys_.assign(model_.h.size(), Tensor());
  values_.assign(model_.h.size(), Tensor());
  Tensor x = embed(model_, ids, 0);
  for (size_t l = 0; l < model_.h.size(); ++l) {
    const Block& b = *model_.h[l];
    // The block's own causal attention on the fused qkv, as in GPT::forward ...
    const Tensor qkv = b.attn.c_attn.forward(b.ln_1.forward(x));
    x = x + b.attn.c_proj.forward(causal_attention(qkv, H, b.attn.attention));
    x = x + b.mlp.forward(b.ln_2.forward(x));
    // ... and its keys and values as heads [1, H, n, D] for the steps that follow.
    const std::vector<Tensor> parts = split(qkv, C, 2);
    keys_[l] = contiguous(transpose(view(parts[1], {1, n, H, D}), 1, 2));
    values_[l] = contiguous(transpose(view(parts[2], {1, n, H, D}), 1, 2));
  }
  pos_ = n;
  return logits_of_last(x);
}

std::vector<float> GPTDecoder::step(int32_t id) {
  NoGradGuard no_grad;
  const GPTConfig& c = model_.config;
  GLASS_CHECK(pos_ >= 1, "GPTDecoder::step: prefill a prompt first");
  GLASS_CHECK(pos_ < c.block_size, "GPTDecoder::step: position {} is past block_size={}", pos_,
              c.block_size);
  const int64_t C = c.n_embd, H = c.n_head, D = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Tensor x = embed(model_, {id}, pos_);
  for (size_t l = 0; l < model_.h.size(); ++l) {
    const Block& b = *model_.h[l];
    // q, k, v of the new position as heads [1, H, 1, D]; k and v join the cache.
    std::vector<Tensor> qkv = split(b.attn.c_attn.forward(b.ln_1.forward(x)), C, 2);
    for (Tensor& t : qkv) t = view(t, {1, H, 1, D});  // [1, 1, H, D] is [1, H, 1, D] for one row
    keys_[l] = concat({keys_[l], qkv[1]}, 2);
    values_[l] = concat({values_[l], qkv[2]}, 2);
    // The new query attends to every cached position (all are in its past): [1, H, 1, pos + 1].
    const Tensor probs = softmax(matmul(qkv[0], transpose(keys_[l], -2, -1)) * scale);
    const Tensor y = view(matmul(probs, values_[l]), {1, 1, C});  // heads side by side
    x = x + b.attn.c_proj.forward(y);
    x = x + b.mlp.forward(b.ln_2.forward(x));
  }
  ++pos_;
  return logits_of_last(x);
}

std::vector<float> GPTDecoder::logits_of_last(const Tensor& x) {
  const int64_t n = x.size(1);
  const Tensor last = n == 1 ? x : slice(x, 1, n - 1, n);
  const Tensor logits = linear(model_.ln_f.forward(last), model_.wte.param(model_.wte.weight));
  return to_vector<float>(logits.dtype() == DType::f32 ? logits : cast(logits, DType::f32));
}

}  // namespace glass
