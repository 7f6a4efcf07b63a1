// Where the attention kernels find a head's rows: the fused qkv [B, T, (H + 2 Hkv) D] (query head
// h at columns h*D.., key head j at (H + j)*D.., value head j at (H + Hkv + j)*D..) and out / dout
// [B, T, H D]. Query head h reads key/value head h / (H / Hkv) (grouped-query attention, Hugging
// Face's repeat_kv; Hkv = H is multi-head attention, qkv [B, T, 3C]). Passed to a kernel by value
// (kernel parameters live in constant memory); kernels/shape_checks.h's FlashAttentionShape checks
// the tensors it describes. A slice is one (batch, query head), a key/value slice one (batch,
// key/value head); key/value slice kv's query slices are kv * group() .. (kv + 1) * group() - 1.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

struct QkvHeads {
  int64_t T, H, Hkv, D;

  static QkvHeads of(const FlashAttentionShape& g) { return {g.T, g.H, g.Hkv, g.D}; }
  __host__ __device__ int64_t width() const { return (H + 2 * Hkv) * D; }  // qkv's row stride
  __host__ __device__ int64_t out_width() const { return H * D; }  // out's and dout's row stride
  __host__ __device__ int64_t group() const { return H / Hkv; }    // query heads per kv head
  // element offsets of row 0 of slice s (= b H + h): its q, k and v in qkv (k and v those of its
  // key/value head) and its head in out
  __host__ __device__ int64_t q_at(int64_t s) const { return (s / H) * T * width() + (s % H) * D; }
  __host__ __device__ int64_t k_at(int64_t s) const {
    return (s / H) * T * width() + (H + (s % H) / group()) * D;
  }
  __host__ __device__ int64_t v_at(int64_t s) const { return k_at(s) + Hkv * D; }
  __host__ __device__ int64_t out_at(int64_t s) const {
    return (s / H) * T * out_width() + (s % H) * D;
  }
};

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
