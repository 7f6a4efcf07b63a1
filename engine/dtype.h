// DType: the element types a Tensor can hold, and the bf16 storage type.
// f32 is the working type, bf16 a storage format (compute happens in f32), i32 holds token ids,
// and f64 exists on `cpu` so that gradcheck can take finite differences without round-off noise.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace glass {

enum class DType : uint8_t { f32, bf16, i32, f64 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::f64:
      return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::f64:
      return "f64";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t != DType::i32; }

// The dtype in which the statistics, sums and losses computed from a tensor of dtype t are kept:
// f32 for bf16 (mixed precision: LayerNorm's mean and rstd, softmax's logsumexp, the loss), t
// itself otherwise.
constexpr DType accum_dtype(DType t) { return t == DType::bf16 ? DType::f32 : t; }

// bfloat16: the top 16 bits of an IEEE float. Converting down rounds to nearest even, so that
// a value survives f32 -> bf16 -> f32 with the error PyTorch gives.
struct bf16 {
  uint16_t bits = 0;
  static bf16 from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bf16 b;
    if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it a (quiet) NaN
      b.bits = static_cast<uint16_t>((u >> 16) | 0x40u);
      return b;
    }
    u += 0x7fffu + ((u >> 16) & 1u);  // round half to even
    b.bits = static_cast<uint16_t>(u >> 16);
    return b;
  }
  float to_float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

// Maps a C++ type to its DType, so that templated code can check what it was handed.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}

}  // namespace glass
