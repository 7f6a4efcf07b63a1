// cpu kernels that fill, copy and convert memory.
#include <cstring>

#include "engine/rng.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// Reads element i of a contiguous tensor of any dtype as double / writes one back.
double load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f64:
      return static_cast<const double*>(p)[i];
    case DType::i32:
      return static_cast<const int32_t*>(p)[i];
    case DType::bf16:
      return static_cast<const bf16*>(p)[i].to_float();
  }
  return 0;
}

void store_any(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::f64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::i32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
    // Through float first: bf16 rounds from the f32 value, as a f32 -> bf16 cast does.
    case DType::bf16:
      static_cast<bf16*>(p)[i] = bf16::from_float(static_cast<float>(v));
      break;
  }
}

}  // namespace

void fill(const Tensor& dst, double value) {
  GLASS_CHECK(dst.is_contiguous(), "fill: destination {} must be contiguous", dst.describe());
  const int64_t n = dst.numel();
  launch(cpu_launch_info("fill", n, 0, static_cast<double>(dst.nbytes())), [&] {
    void* p = dst.raw_data();
    const DType t = dst.dtype();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) store_any(p, t, i, value);
  });
}

void copy(const Tensor& src, const Tensor& dst) {
  GLASS_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(),
              "copy: source {} and destination {} differ", src.describe(), dst.describe());
  const size_t es = dtype_size(src.dtype());
  launch(cpu_launch_info("copy", src.numel(), 0, 2.0 * static_cast<double>(src.nbytes())), [&] {
    if (src.is_contiguous() && dst.is_contiguous()) {
      std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
      return;
    }
    const char* s = static_cast<const char*>(src.raw_data());
    char* d = static_cast<char*>(dst.raw_data());
    StridedLoop<2>{src.shape(), {src.strides(), dst.strides()}}.run(
        [&](const auto& off, const auto& st, int64_t n) {
          for (int64_t j = 0; j < n; ++j)
            std::memcpy(d + (off[1] + j * st[1]) * es, s + (off[0] + j * st[0]) * es, es);
        });
  });
}

void cast(const Tensor& src, const Tensor& dst) {
  GLASS_CHECK(src.shape() == dst.shape() && src.is_contiguous() && dst.is_contiguous(),
              "cast: source {} and destination {} must be contiguous and of one shape",
              src.describe(), dst.describe());
  const int64_t n = src.numel();
  launch(cpu_launch_info("cast", n, 0, static_cast<double>(src.nbytes() + dst.nbytes())), [&] {
    const void* s = src.raw_data();
    void* d = dst.raw_data();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
    for (int64_t i = 0; i < n; ++i) store_any(d, dst.dtype(), i, load_any(s, src.dtype(), i));
  });
}

void fill_normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  GLASS_CHECK(dst.is_contiguous(), "fill_normal: {} must be contiguous", dst.describe());
  const int64_t n = dst.numel();
  launch(cpu_launch_info("fill_normal", n, 0, static_cast<double>(dst.nbytes())), [&] {
    void* p = dst.raw_data();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain / 8)
    for (int64_t i = 0; i < n; ++i)
      store_any(p, dst.dtype(), i, mean + std * philox_normal(seed, offset, i));
  });
}

void fill_uniform(const Tensor& dst, double lo, double hi, uint64_t seed, uint64_t offset) {
  GLASS_CHECK(dst.is_contiguous(), "fill_uniform: {} must be contiguous", dst.describe());
  const int64_t n = dst.numel();
  launch(cpu_launch_info("fill_uniform", n, 0, static_cast<double>(dst.nbytes())), [&] {
    void* p = dst.raw_data();
#pragma omp parallel for schedule(static) if (n >= kParallelGrain / 8)
    for (int64_t i = 0; i < n; ++i)
      store_any(p, dst.dtype(), i, lo + (hi - lo) * philox_uniform(seed, offset, i));
  });
}

}  // namespace glass::kernels::cpu
