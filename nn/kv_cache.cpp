#include "nn/kv_cache.h"

#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

void linear_into(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& out) {
  kernels::GemmArgs g;
  g.a = x;
  g.b = weight;
  g.c = out;
  g.bias = bias;
  g.trans_b = true;
  g.k = weight.size(1);
  g.n = weight.size(0);
  g.m = x.numel() / g.k;
  g.lda = g.k;
  g.ldb = g.k;
  g.ldc = g.n;
  kernels::backend(out).gemm(g);
}

Tensor rows_of(const Tensor& t, int64_t rows, int64_t cols, int64_t offset) {
  return t.as_strided({rows, cols}, {cols, 1}, t.offset() + offset);
}

bool DecoderRows::reserve(int64_t C, int64_t heads_width, int64_t table_rows, DType dtype,
                          Device device) {
  if (x.defined() && x.dtype() == dtype && x.device() == device) return false;
  const auto row = [&](int64_t width, DType type) {
    return Tensor::empty({1, width}, type, device);
  };
  x = row(C, dtype);
  h = row(C, dtype);
  normed = row(C, dtype);
  rstd = Tensor::empty({1}, accum_dtype(dtype), device);
  heads = row(heads_width, dtype);
  delta = row(C, dtype);
  logits = row(table_rows, dtype);
  logits_f32 = dtype == DType::f32 ? logits : row(table_rows, DType::f32);
  host_logits.resize(static_cast<size_t>(table_rows));
  return true;
}

const std::vector<float>& DecoderRows::read_logits() {
  if (!logits_f32.is_same(logits)) kernels::backend(logits).cast(logits, logits_f32);
  logits_f32.copy_to_host(host_logits.data());
  return host_logits;
}

std::vector<float> host_f32(const Tensor& logits) {
  return to_vector<float>(logits.dtype() == DType::f32 ? logits : cast(logits, DType::f32));
}

void KVCache::reserve(int64_t layers, int64_t n_head, int64_t kv_heads, int64_t positions,
                      int64_t head_dim, DType dtype, Device device) {
  const bool same = static_cast<int64_t>(keys_.size()) == layers && n_head_ == n_head &&
                    kv_heads_ == kv_heads && positions_ == positions && head_dim_ == head_dim &&
                    layers > 0 && keys_[0].dtype() == dtype && keys_[0].device() == device;
  if (same) return;
  n_head_ = n_head;
  kv_heads_ = kv_heads;
  positions_ = positions;
  head_dim_ = head_dim;
  keys_.clear();
  values_.clear();
  for (int64_t l = 0; l < layers; ++l) {
    keys_.push_back(Tensor::empty({kv_heads, positions, head_dim}, dtype, device));
    values_.push_back(Tensor::empty({kv_heads, positions, head_dim}, dtype, device));
  }
  scores_ = Tensor::empty({n_head, positions}, dtype, device);
  probs_ = Tensor::empty({n_head, positions}, dtype, device);
  // Every page touched now, with the prompt, rather than one by one as later tokens reach them
  // (GPT-2 124M: 18 page faults per token otherwise).
  const kernels::Backend& table = kernels::backend(device);
  for (const std::vector<Tensor>* tensors : {&keys_, &values_})
    for (const Tensor& t : *tensors) table.fill(t, 0);
  table.fill(scores_, 0);
  table.fill(probs_, 0);
}

void KVCache::store(int64_t layer, const Tensor& qkv, int64_t n, int64_t pos, int64_t k_column,
                    int64_t v_column) {
  GLASS_CHECK(pos >= 0 && n >= 1 && pos + n <= positions_,
              "KVCache: positions {}..{} do not fit its {}", pos, pos + n - 1, positions_);
  const int64_t W = qkv.size(-1), D = head_dim_, T = positions_, H = kv_heads_;
  const kernels::Backend& table = kernels::backend(qkv);
  const auto heads_of = [&](int64_t column) {  // [H, n, D] of qkv's rows, head by head
    return qkv.as_strided({H, n, D}, {D, W, 1}, qkv.offset() + column);
  };
  const auto rows_at = [&](const Tensor& cache) {  // [H, n, D] at positions pos..
    return cache.as_strided({H, n, D}, {T * D, D, 1}, pos * D);
  };
  const size_t l = static_cast<size_t>(layer);
  table.copy(heads_of(k_column), rows_at(keys_[l]));
  table.copy(heads_of(v_column), rows_at(values_[l]));
}

void KVCache::attend(int64_t layer, const Tensor& qkv, int64_t positions, double scale,
                     const Tensor& out) {
  GLASS_CHECK(positions >= 1 && positions <= positions_,
              "KVCache: attention over {} positions; it holds {}", positions, positions_);
  const int64_t G = n_head_ / kv_heads_, D = head_dim_, T = positions_, P = positions;
  const kernels::Backend& table = kernels::backend(out);
  const size_t l = static_cast<size_t>(layer);
  // scores [Hkv][G, P] = q [Hkv][G, D] K^T (K [Hkv][P, D] of the cache's [T, D]) * scale
  kernels::GemmArgs s;
  s.a = qkv;
  s.b = keys_[l];
  s.c = scores_;
  s.trans_b = true;
  s.m = G;
  s.n = P;
  s.k = D;
  s.batch = kv_heads_;
  s.lda = D;
  s.ldb = D;
  s.ldc = P;
  s.stride_a = G * D;
  s.stride_b = T * D;
  s.stride_c = G * P;
  s.alpha = scale;
  table.gemm(s);
  table.softmax_forward(rows_of(scores_, n_head_, P), rows_of(probs_, n_head_, P));
  // out [Hkv][G, D] = p [Hkv][G, P] V [Hkv][P, D]: head h at columns h D.., as the model's
  kernels::GemmArgs y;
  y.a = probs_;
  y.b = values_[l];
  y.c = out;
  y.m = G;
  y.n = D;
  y.k = P;
  y.batch = kv_heads_;
  y.lda = P;
  y.ldb = D;
  y.ldc = D;
  y.stride_a = G * P;
  y.stride_b = T * D;
  y.stride_c = G * D;
  table.gemm(y);
}

int64_t KVCache::bytes() const {
  int64_t total = 0;
  for (size_t l = 0; l < keys_.size(); ++l)
    total += static_cast<int64_t>(keys_[l].nbytes() + values_[l].nbytes());
  return total;
}

}  // namespace glass
