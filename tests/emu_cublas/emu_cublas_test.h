// Helpers for the emu_cublas suite (and the emulated cuBLAS's own, emucuda/tests/cublas): random
// host data, the same data as a tensor on `cpu` and on `emu` (device memory that is host memory),
// reading results back, and catching error messages.
#pragma once

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/rng.h"
#include "engine/tensor.h"

namespace glass::emu_cublas_test {

// Fills what a product must overwrite (or must not read): a NaN left over shows.
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// n standard normals times `scale`, from a Philox stream of their own.
inline std::vector<float> randoms(size_t n, uint64_t seed, double scale = 1) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(scale * philox_normal(seed, 0, i));
  return v;
}

template <class T>
Tensor make(const std::vector<T>& v, const Shape& shape, Device device) {
  return Tensor::from_host(v.data(), shape, dtype_of<T>(), device);
}

template <class T = float>
std::vector<T> read(const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  t.copy_to_host(v.data());
  return v;
}

inline std::vector<double> as_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// The message of the glass::Error fn throws, or "" when it throws none.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(text, part)                          \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "missing '" << (part) << "' in: " << (text)

}  // namespace glass::emu_cublas_test
