// CUDA kernels that fill, copy and convert memory, with their host launchers.
//
// Thread mapping (every kernel here): one thread per element, 256 threads per block, grid =
// ceil(n / 256); the tail block's threads past n return at once. Consecutive threads touch
// consecutive elements, so loads and stores of contiguous tensors are coalesced.
// dtypes travel as raw bits where the kernel only moves data (copy: by element size) and are
// converted in f64 where it converts (cast, random fills), exactly as the cpu kernels do, so
// that cpu and emu agree bit for bit. bf16 rounds to nearest even from the f32 value.
#include "engine/rng.h"
#include "kernels/costs/memory.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/saturating_cast.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;

// f32 -> bf16 bits, rounding to nearest even; a NaN stays a quiet NaN (as glass::bf16).
__device__ uint16_t bf16_bits_from_float(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

__device__ float float_from_bf16_bits(uint16_t b) {
  return __uint_as_float(static_cast<uint32_t>(b) << 16);
}

// Element i of an array of dtype t, as double.
__device__ double load_any(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f64:
      return static_cast<const double*>(p)[i];
    case DType::i32:
      return static_cast<const int32_t*>(p)[i];
    case DType::bf16:
      return float_from_bf16_bits(static_cast<const uint16_t*>(p)[i]);
  }
  return 0;
}

// Stores v as element i of an array of dtype t (bf16 rounds from the f32 value, as a cast does).
__device__ void store_any(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::f64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::i32:
      static_cast<int32_t*>(p)[i] = saturating_i32(v);  // NaN -> 0, out of range saturates
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p)[i] = bf16_bits_from_float(static_cast<float>(v));
      break;
  }
}

__device__ int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// --- fill: p[i] = value, with value already in the element type (bits for bf16) ---

template <class T>
__global__ void fill_kernel(T* p, T value, int64_t n) {
  const int64_t i = global_index();
  if (i < n) p[i] = value;
}

// --- copy: dst[offset_dst(i)] = src[offset_src(i)], element i of the shape in row-major order.
// T is an unsigned integer of the element's size: copying moves bits, whatever the dtype.

template <class T>
__global__ void copy_kernel(const T* src, T* dst, StridedIndex<2> idx, int64_t n) {
  const int64_t i = global_index();
  if (i >= n) return;
  int64_t off[2];
  idx.offsets(i, off);
  dst[off[1]] = src[off[0]];
}

// --- cast: dst[i] = convert(src[i]) through f64 (exact for every value of f32, bf16 and i32) ---

__global__ void cast_kernel(const void* src, DType src_type, void* dst, DType dst_type, int64_t n) {
  const int64_t i = global_index();
  if (i < n) store_any(dst, dst_type, i, load_any(src, src_type, i));
}

// --- random fills: element i from Philox stream (seed, offset), a pure function of i ---

__global__ void fill_normal_kernel(void* p, DType t, int64_t n, double mean, double std,
                                   uint64_t seed, uint64_t offset) {
  const int64_t i = global_index();
  if (i < n) store_any(p, t, i, mean + std * philox_normal(seed, offset, i));
}

__global__ void fill_uniform_kernel(void* p, DType t, int64_t n, double lo, double hi,
                                    uint64_t seed, uint64_t offset) {
  const int64_t i = global_index();
  if (i < n) store_any(p, t, i, lo + (hi - lo) * philox_uniform(seed, offset, i));
}

// Launches kernel over the n elements of `on`, one thread each. Every kernel here only moves
// bytes (the random fills' Philox arithmetic is not counted as FLOPs): its unit is `memory`.
template <class... Params, class... Args>
void launch_elements(const char* name, const Tensor& on, int64_t n, LaunchCost cost,
                     void (*kernel)(Params...), Args&&... args) {
  const dim3 grid(ceil_div(n, kThreads)), block(kThreads);
  LaunchInfo info = kernel_launch_info(name, on, grid, block, 0, cost.flops, cost.bytes);
  info.unit = ComputeUnit::memory;
  launch_cuda_kernel(info, kernel, std::forward<Args>(args)...);
}

void check_contiguous(const char* kernel, const Tensor& t) {
  GLASS_CHECK(t.is_contiguous(), "{}: {} must be contiguous", kernel, t.describe());
}

}  // namespace

void fill(const Tensor& dst, double value) {
  check_contiguous("fill", dst);
  const int64_t n = dst.numel();
  if (n == 0) return;
  const LaunchCost cost = fill_cost(dst);
  // The value is converted once, on the host, into the element's bits.
  switch (dst.dtype()) {
    case DType::f32:
      return launch_elements("fill", dst, n, cost, fill_kernel<float>, dst.data<float>(),
                             static_cast<float>(value), n);
    case DType::f64:
      return launch_elements("fill", dst, n, cost, fill_kernel<double>, dst.data<double>(), value,
                             n);
    case DType::i32:
      return launch_elements("fill", dst, n, cost, fill_kernel<int32_t>, dst.data<int32_t>(),
                             saturating_i32(value), n);
    case DType::bf16:
      return launch_elements("fill", dst, n, cost, fill_kernel<uint16_t>,
                             static_cast<uint16_t*>(dst.raw_data()),
                             bf16::from_float(static_cast<float>(value)).bits, n);
  }
}

void copy(const Tensor& src, const Tensor& dst) {
  GLASS_CHECK(src.shape() == dst.shape() && src.dtype() == dst.dtype(),
              "copy: source {} and destination {} differ", src.describe(), dst.describe());
  const int64_t n = src.numel();
  if (n == 0) return;
  const StridedIndex<2> idx =
      make_strided_index<2>("copy", src, src.shape(), {src.strides(), dst.strides()});
  const LaunchCost cost = copy_cost(src, dst);
  switch (dtype_size(src.dtype())) {
    case 2:
      return launch_elements("copy", dst, n, cost, copy_kernel<uint16_t>,
                             static_cast<const uint16_t*>(src.raw_data()),
                             static_cast<uint16_t*>(dst.raw_data()), idx, n);
    case 4:
      return launch_elements("copy", dst, n, cost, copy_kernel<uint32_t>,
                             static_cast<const uint32_t*>(src.raw_data()),
                             static_cast<uint32_t*>(dst.raw_data()), idx, n);
    case 8:
      return launch_elements("copy", dst, n, cost, copy_kernel<uint64_t>,
                             static_cast<const uint64_t*>(src.raw_data()),
                             static_cast<uint64_t*>(dst.raw_data()), idx, n);
  }
  fail("copy: no kernel for elements of {} bytes: {}", dtype_size(src.dtype()), src.describe());
}

void cast(const Tensor& src, const Tensor& dst) {
  GLASS_CHECK(src.shape() == dst.shape() && src.is_contiguous() && dst.is_contiguous(),
              "cast: source {} and destination {} must be contiguous and of one shape",
              src.describe(), dst.describe());
  const int64_t n = src.numel();
  if (n == 0) return;
  launch_elements("cast", dst, n, copy_cost(src, dst), cast_kernel, src.raw_data(), src.dtype(),
                  dst.raw_data(), dst.dtype(), n);
}

void fill_normal(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset) {
  check_contiguous("fill_normal", dst);
  const int64_t n = dst.numel();
  if (n == 0) return;
  launch_elements("fill_normal", dst, n, fill_cost(dst), fill_normal_kernel, dst.raw_data(),
                  dst.dtype(), n, mean, std, seed, offset);
}

void fill_uniform(const Tensor& dst, double lo, double hi, uint64_t seed, uint64_t offset) {
  check_contiguous("fill_uniform", dst);
  const int64_t n = dst.numel();
  if (n == 0) return;
  launch_elements("fill_uniform", dst, n, fill_cost(dst), fill_uniform_kernel, dst.raw_data(),
                  dst.dtype(), n, lo, hi, seed, offset);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
