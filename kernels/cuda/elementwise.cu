// CUDA elementwise kernels with their host launchers: binary ops over broadcasting strides,
// affine, pow, GELU and dropout.
//
// Thread mapping: one thread per element (unary maps and binary ops on contiguous operands: per
// 16-byte vector when the arrays are aligned, kernels/cuda/vector_row.h; dropout: per group of
// four, one vector in f32, below), 256 threads per block, grid = ceil(items / 256), the tail
// block's extra threads return at once. Consecutive threads handle consecutive elements, so
// contiguous operands are read and written coalesced.
// Kernels are templates over the stored element type T (f32, bf16, and f64 for gradcheck) and
// over a small functor holding the op and its scalars, so that each op is one line of math and
// every op shares one kernel body. The functor computes in compute_t<T> (f32 for bf16): each
// element is loaded exactly, computed in f32 and rounded once when stored.
#include "engine/rng.h"
#include "kernels/costs/elementwise.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/vector_row.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;

// Math that picks the f32 or f64 function by argument type, on host and device alike.
__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }
__device__ inline float pow_of(float x, float p) { return powf(x, p); }
__device__ inline double pow_of(double x, double p) { return pow(x, p); }

__device__ inline int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// --- binary: out = a op b, each operand with its own strides (a broadcast dimension has
// stride 0). Element i reads a and b before writing out, so out may alias a or b.

struct Add {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Sub {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a - b;
  }
};
struct Mul {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a * b;
  }
};
struct Div {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a / b;
  }
};

// `vectorised`: the three operands are contiguous, alike and 16-byte aligned, and thread u takes
// unit u (vector_row.h) of them; otherwise thread i takes element i through the strides.
template <class T, class Op>
__global__ void binary_kernel(const T* a, const T* b, T* out, StridedIndex<3> idx, int64_t n,
                              bool vectorised, Op op) {
  const int64_t i = global_index();
  if (vectorised) {
    visit_unit<T>(
        true, i, n,
        [&](int64_t j) {
          const Vec<T> x = load_vec(a + j), y = load_vec(b + j);
          Vec<T> r;
          for (int k = 0; k < kVecWidth<T>; ++k)
            r.v[k] = from_compute<T>(op(to_compute(x.v[k]), to_compute(y.v[k])));
          store_vec(out + j, r);
        },
        [&](int64_t j) { out[j] = from_compute<T>(op(to_compute(a[j]), to_compute(b[j]))); });
    return;
  }
  if (i >= n) return;
  int64_t off[3];
  idx.offsets(i, off);
  out[off[2]] = from_compute<T>(op(to_compute(a[off[0]]), to_compute(b[off[1]])));
}

// --- unary maps: y[i] = f(x[i]) and, for backward, dx[i] = f(x[i], dy[i]) on contiguous arrays.
// Thread u takes unit u (vector_row.h): one 16-byte vector of each array (4 f32, 8 bf16, 2 f64)
// when the launcher found every array 16-byte aligned (`vectorised`), the scalar tail, or one
// element on the scalar path.

template <class T, class F>
__global__ void map1_kernel(const T* x, T* y, int64_t n, bool vectorised, F f) {
  visit_unit<T>(
      vectorised, global_index(), n,
      [&](int64_t i) {
        const Vec<T> a = load_vec(x + i);
        Vec<T> r;
        for (int k = 0; k < kVecWidth<T>; ++k) r.v[k] = from_compute<T>(f(to_compute(a.v[k])));
        store_vec(y + i, r);
      },
      [&](int64_t i) { y[i] = from_compute<T>(f(to_compute(x[i]))); });
}

template <class T, class F>
__global__ void map2_kernel(const T* x, const T* dy, T* dx, int64_t n, bool vectorised, F f) {
  visit_unit<T>(
      vectorised, global_index(), n,
      [&](int64_t i) {
        const Vec<T> a = load_vec(x + i), b = load_vec(dy + i);
        Vec<T> r;
        for (int k = 0; k < kVecWidth<T>; ++k)
          r.v[k] = from_compute<T>(f(to_compute(a.v[k]), to_compute(b.v[k])));
        store_vec(dx + i, r);
      },
      [&](int64_t i) { dx[i] = from_compute<T>(f(to_compute(x[i]), to_compute(dy[i]))); });
}

template <class T>
struct Affine {  // x * mul + add
  T mul, add;
  __device__ T operator()(T x) const { return x * mul + add; }
};

template <class T>
struct Square {  // x^2: common (variances, norms) and exact without pow
  __device__ T operator()(T x) const { return x * x; }
};

template <class T>
struct Power {  // x^p
  T p;
  __device__ T operator()(T x) const { return pow_of(x, p); }
};

// GELU (tanh approximation): y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 1 + tanh(u) = 2 sigmoid(2u), y = x sigmoid(2u): one exp, and no cancellation near 0.
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

// sigmoid(2u) = 1 / (1 + e^(-2u)), with u = sqrt(2/pi) (x + c x^3).
template <class T>
__device__ T gelu_sigmoid_2u(T x) {
  const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  return T(1) / (T(1) + exp_of(T(-2) * u));
}

template <class T>
struct GeluForward {
  __device__ T operator()(T x) const { return x * gelu_sigmoid_2u(x); }
};

template <class T>
struct GeluBackward {
  // With t = tanh(u) and q = sigmoid(2u): 1 + t = 2q and 1 - t^2 = 4q(1 - q), so
  // dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx = q + 2 x q (1 - q) du/dx,
  // du/dx = sqrt(2/pi) (1 + 3c x^2).
  __device__ T operator()(T x, T dy) const {
    const T q = gelu_sigmoid_2u(x);
    const T du = T(kSqrt2OverPi) * (T(1) + T(3) * T(kGeluCubic) * x * x);
    return dy * (q + T(2) * x * q * (T(1) - q) * du);
  }
};

// --- dropout: y[i] = x[i] / (1 - p) when element i is kept, else 0.
// Element i is kept when its 24-bit uniform philox_uniform(seed, off, i) = k / 2^24 is >= p,
// i.e. when k >= threshold = ceil(p 2^24): an exact integer test, the same as on cpu. One Philox
// call yields the words of four consecutive elements (counter block off + i/4), so each thread
// handles one such group of four: thread g computes block g once and applies its four lanes.
// off = philox_offset(rng) is read when the kernel runs: from device memory under a CUDA graph
// (engine/rng.h), so each replay draws a fresh mask.
template <class T>
// `vectorised` (f32 only: four floats are one 16-byte vector; x and y 16-byte aligned): a whole
// group is read and written as one vector (vector_row.h).
__global__ void dropout_kernel(const T* x, T* y, int64_t n, uint32_t threshold, compute_t<T> scale,
                               PhiloxArgs rng, bool vectorised) {
  const int64_t g = global_index();
  if (g * 4 >= n) return;
  const Philox4 r = philox4x32_10(rng.seed, philox_offset(rng) + static_cast<uint64_t>(g), 0);
  auto dropped = [&](int lane, T v) {
    return from_compute<T>((r.v[lane] >> 8) >= threshold ? to_compute(v) * scale : 0);
  };
  if constexpr (kVecWidth<T> == 4) {
    if (vectorised && g * 4 + 4 <= n) {
      const Vec<T> a = load_vec(x + g * 4);
      Vec<T> o;
      for (int lane = 0; lane < 4; ++lane) o.v[lane] = dropped(lane, a.v[lane]);
      store_vec(y + g * 4, o);
      return;
    }
  }
  for (int lane = 0; lane < 4; ++lane) {
    const int64_t i = g * 4 + lane;
    if (i < n) y[i] = dropped(lane, x[i]);
  }
}

// Launches kernel over `items` work items, one thread each. `function` names a generic kernel
// that the launch `name` runs ("map1" for map1_kernel), nullptr when it is name + "_kernel".
template <class... Params, class... Args>
void launch_items(const char* name, const char* function, const Tensor& on, int64_t items,
                  double flops, double bytes, void (*kernel)(Params...), Args&&... args) {
  const dim3 grid(ceil_div(items, kThreads)), block(kThreads);
  LaunchInfo info = kernel_launch_info(name, on, grid, block, 0, flops, bytes);
  info.function = function;
  launch_cuda_kernel(info, kernel, std::forward<Args>(args)...);
}

// Checks that x and y are contiguous and alike: the shape every unary kernel needs.
void check_unary(const char* kernel, const Tensor& x, const Tensor& y) {
  GLASS_CHECK(
      x.shape() == y.shape() && x.dtype() == y.dtype() && x.is_contiguous() && y.is_contiguous(),
      "{}: input {} and output {} must be contiguous, of one shape and dtype", kernel, x.describe(),
      y.describe());
}

// y = f(x) with f = F<C>{scalars...}, the scalars converted to the compute type C of x's
// elements.
template <template <class> class F, class... Scalars>
void launch_map1(const char* name, const Tensor& x, const Tensor& y, double flops_per_element,
                 Scalars... scalars) {
  check_unary(name, x, y);
  const int64_t n = x.numel();
  if (n == 0) return;
  visit_element(x, name, [&]<class T>() {
    using C = compute_t<T>;
    const bool vectorised = all_vec_aligned(x.data<T>(), y.data<T>());
    const LaunchCost cost = map_cost(x, flops_per_element);
    launch_items(name, "map1", y, vec_units<T>(n, vectorised), cost.flops, cost.bytes,
                 map1_kernel<T, F<C>>, x.data<T>(), y.data<T>(), n, vectorised,
                 F<C>{static_cast<C>(scalars)...});
  });
}

template <class T, class Op>
void launch_binary(const char* name, const Tensor& a, const Tensor& b, const Tensor& out,
                   LaunchCost cost, Op op) {
  const int64_t n = out.numel();
  const StridedIndex<3> idx =
      make_strided_index<3>(name, out, out.shape(), {a.strides(), b.strides(), out.strides()});
  // merged to one dimension of stride 1 each: contiguous operands walked alike
  const bool contiguous =
      idx.ndim == 1 && idx.stride[0][0] == 1 && idx.stride[1][0] == 1 && idx.stride[2][0] == 1;
  const bool vectorised = contiguous && all_vec_aligned(a.data<T>(), b.data<T>(), out.data<T>());
  launch_items(name, "binary", out, vec_units<T>(n, vectorised), cost.flops, cost.bytes,
               binary_kernel<T, Op>, a.data<T>(), b.data<T>(), out.data<T>(), idx, n, vectorised,
               op);
}

void dropout(const char* kernel, const Tensor& x, const Tensor& y, double p,
             const PhiloxArgs& rng) {
  check_unary(kernel, x, y);
  GLASS_CHECK(p >= 0 && p <= 1, "{}: probability {} is outside [0, 1] for {}", kernel, p,
              x.describe());
  const int64_t n = x.numel();
  if (n == 0) return;
  const uint32_t threshold = static_cast<uint32_t>(std::ceil(p * 16777216.0));
  visit_element(x, kernel, [&]<class T>() {
    using C = compute_t<T>;
    const C scale = p < 1 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
    const bool vectorised = kVecWidth<T> == 4 && all_vec_aligned(x.data<T>(), y.data<T>());
    const LaunchCost cost = map_cost(x, 1);
    launch_items(kernel, "dropout", y, (n + 3) / 4, cost.flops, cost.bytes, dropout_kernel<T>,
                 x.data<T>(), y.data<T>(), n, threshold, scale, rng, vectorised);
  });
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = binary_op_name(op);
  GLASS_CHECK(a.shape() == out.shape() && b.shape() == out.shape() && a.dtype() == out.dtype() &&
                  b.dtype() == out.dtype(),
              "binary {}: operands {} and {} must have the output's shape and dtype, {}", name,
              a.describe(), b.describe(), out.describe());
  if (out.numel() == 0) return;
  const LaunchCost cost = binary_cost(a, b, out);
  visit_element(out, name, [&]<class T>() {
    switch (op) {
      case BinaryOp::add:
        return launch_binary<T>(name, a, b, out, cost, Add{});
      case BinaryOp::sub:
        return launch_binary<T>(name, a, b, out, cost, Sub{});
      case BinaryOp::mul:
        return launch_binary<T>(name, a, b, out, cost, Mul{});
      case BinaryOp::div:
        return launch_binary<T>(name, a, b, out, cost, Div{});
    }
  });
}

void affine(const Tensor& x, const Tensor& out, double mul, double add) {
  launch_map1<Affine>("affine", x, out, 2, mul, add);
}

void pow_scalar(const Tensor& x, const Tensor& out, double p) {
  if (p == 2) return launch_map1<Square>("pow_scalar", x, out, 1);
  launch_map1<Power>("pow_scalar", x, out, 1, p);
}

void gelu_forward(const Tensor& x, const Tensor& y) {
  launch_map1<GeluForward>("gelu_forward", x, y, kGeluForwardFlops);
}

void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  check_unary("gelu_backward", x, dx);
  check_unary("gelu_backward", dy, dx);
  const int64_t n = x.numel();
  if (n == 0) return;
  visit_element(x, "gelu_backward", [&]<class T>() {
    using C = compute_t<T>;
    const bool vectorised = all_vec_aligned(x.data<T>(), dy.data<T>(), dx.data<T>());
    const LaunchCost cost = gelu_backward_cost(x);
    launch_items("gelu_backward", "map2", dx, vec_units<T>(n, vectorised), cost.flops, cost.bytes,
                 map2_kernel<T, GeluBackward<C>>, x.data<T>(), dy.data<T>(), dx.data<T>(), n,
                 vectorised, GeluBackward<C>{});
  });
}

void dropout_forward(const Tensor& x, const Tensor& y, double p, const PhiloxArgs& rng) {
  dropout("dropout_forward", x, y, p, rng);
}

// dx = dy * mask / (1 - p): the forward map applied to dy, with the mask regenerated.
void dropout_backward(const Tensor& dy, const Tensor& dx, double p, const PhiloxArgs& rng) {
  dropout("dropout_backward", dy, dx, p, rng);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
