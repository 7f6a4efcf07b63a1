// cpu elementwise kernels: binary ops over broadcasting strides, affine, pow, GELU and dropout.
//
// Each kernel is one pass over memory. Binary ops take operands of any strides (a broadcast
// dimension has stride 0): the dimensions are first simplified (size-1 dimensions dropped,
// neighbours merged where every operand walks them as one) so that common cases become one
// contiguous loop, or rows whose inner run is contiguous or a broadcast scalar.
// Kernels are templates over the stored element type T (f32, bf16, and f64 for gradcheck); the math
// runs in compute_t<T> (f32 for bf16: each element loaded exactly, computed in f32 and rounded
// once when stored, kernels/cpu/element.h), so each op's lambda takes and returns compute_t<T>.
// Dropout draws its keep/drop decision from Philox, one 32-bit word per element, so the mask is
// a pure function of (seed, offset, element index): backward regenerates it and stores nothing.
#include <bit>
#include <cmath>

#include "engine/rng.h"
#include "kernels/costs/elementwise.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gelu.h"

namespace glass::kernels::cpu {

namespace {

// out[i] = f(a[i], b[i]) for contiguous arrays, threaded when large (in ranges of whole vectors).
// a may be stored in another type than b and out (bf16's GELU backward: bf16 x, f32 dy).
template <class T, class F, class A = T>
void map2(const A* a, const T* b, T* out, int64_t n, F f) {
  parallel_ranges(
      n, n >= kParallelGrain,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          out[i] = from_compute<T>(f(to_compute(a[i]), to_compute(b[i])));
      },
      kRowLanes);
}

// out[i] = f(x[i]) for contiguous arrays, threaded when large (as map2). out may be stored in
// another type than x (bf16's GELU: f32 pre, bf16 out, rounded once).
template <class T, class F, class O = T>
void map1(const T* x, O* out, int64_t n, F f) {
  parallel_ranges(
      n, n >= kParallelGrain,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = from_compute<O>(f(to_compute(x[i])));
      },
      kRowLanes);
}

// out = f(a, b) where a, b and out share out's shape with any strides.
template <class T, class F>
void binary_strided(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous())
    return map2(pa, pb, po, out.numel(), f);
  simplify<3>(out.shape(), {a.strides(), b.strides(), out.strides()})
      .run([&](const auto& off, const auto& st, int64_t len) {
        const T* ra = pa + off[0];
        const T* rb = pb + off[1];
        T* ro = po + off[2];
        // The row's inner run: contiguous, one side a broadcast scalar, or general strides.
        const auto at = [&](int64_t ia, int64_t ib) {
          return from_compute<T>(f(to_compute(ra[ia]), to_compute(rb[ib])));
        };
        if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
          for (int64_t j = 0; j < len; ++j) ro[j] = at(j, j);
        } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
          for (int64_t j = 0; j < len; ++j) ro[j] = at(j, 0);
        } else if (st[0] == 0 && st[1] == 1 && st[2] == 1) {
          for (int64_t j = 0; j < len; ++j) ro[j] = at(0, j);
        } else {
          for (int64_t j = 0; j < len; ++j) ro[j * st[2]] = at(j * st[0], j * st[1]);
        }
      });
}

// Checks that x and y are contiguous and alike: the shape every unary kernel needs.
void check_unary(const char* kernel, const Tensor& x, const Tensor& y) {
  GLASS_CHECK(
      x.shape() == y.shape() && x.dtype() == y.dtype() && x.is_contiguous() && y.is_contiguous(),
      "{}: input {} and output {} must be contiguous, of one shape and dtype", kernel, x.describe(),
      y.describe());
}

// Inverted dropout of contiguous x into y. Element i is kept when its 24-bit uniform
// philox_uniform(seed, off, i) = k / 2^24 is >= p, that is when k >= ceil(p * 2^24): an exact
// integer test. One Philox call yields the words of four consecutive elements.
template <class T>
void dropout_apply(const T* x, T* y, int64_t n, double p, uint64_t seed, uint64_t off) {
  const uint32_t threshold = static_cast<uint32_t>(std::ceil(p * 16777216.0));
  using C = compute_t<T>;
  const C scale = p < 1 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
  const int64_t blocks = (n + 3) / 4;
  // Philox draws cost more than a store: threaded from fewer elements.
  parallel_ranges(blocks, n >= kParallelGrain / 8, [&](int64_t first, int64_t last) {
    for (int64_t blk = first; blk < last; ++blk) {
      const Philox4 r = philox4x32_10(seed, off + static_cast<uint64_t>(blk), 0);
      const int64_t lanes = std::min<int64_t>(4, n - blk * 4);
      for (int64_t l = 0; l < lanes; ++l) {
        const int64_t i = blk * 4 + l;
        y[i] = from_compute<T>((r.v[l] >> 8) >= threshold ? to_compute(x[i]) * scale : C(0));
      }
    }
  });
}

void dropout(const char* kernel, const Tensor& x, const Tensor& y, double p,
             const PhiloxArgs& rng) {
  check_unary(kernel, x, y);
  GLASS_CHECK(p >= 0 && p <= 1, "{}: probability {} is outside [0, 1] for {}", kernel, p,
              x.describe());
  const int64_t n = x.numel();
  const LaunchCost cost = map_cost(x, 1);
  launch(cpu_launch_info(kernel, n, cost.flops, cost.bytes), [&] {
    // The offset read when the kernel runs (rng.offset_base is host memory on cpu).
    const uint64_t off = philox_offset(rng);
    visit_element(x, kernel,
                  [&]<class T>() { dropout_apply(x.data<T>(), y.data<T>(), n, p, rng.seed, off); });
  });
}

}  // namespace

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  const char* name = binary_op_name(op);
  GLASS_CHECK(a.shape() == out.shape() && b.shape() == out.shape() && a.dtype() == out.dtype() &&
                  b.dtype() == out.dtype(),
              "binary {}: operands {} and {} must have the output's shape and dtype, {}", name,
              a.describe(), b.describe(), out.describe());
  const int64_t n = out.numel();
  const LaunchCost cost = binary_cost(a, b, out);
  launch(cpu_launch_info(name, n, cost.flops, cost.bytes), [&] {
    visit_element(out, name, [&]<class T>() {
      using C = compute_t<T>;
      switch (op) {
        case BinaryOp::add:
          return binary_strided<T>(a, b, out, [](C x, C y) { return x + y; });
        case BinaryOp::sub:
          return binary_strided<T>(a, b, out, [](C x, C y) { return x - y; });
        case BinaryOp::mul:
          return binary_strided<T>(a, b, out, [](C x, C y) { return x * y; });
        case BinaryOp::div:
          return binary_strided<T>(a, b, out, [](C x, C y) { return x / y; });
      }
    });
  });
}

void affine(const Tensor& x, const Tensor& out, double mul, double add) {
  check_unary("affine", x, out);
  const int64_t n = x.numel();
  const LaunchCost cost = map_cost(x, 2);
  launch(cpu_launch_info("affine", n, cost.flops, cost.bytes), [&] {
    visit_element(x, "affine", [&]<class T>() {
      using C = compute_t<T>;
      const C m = static_cast<C>(mul), a = static_cast<C>(add);
      map1(x.data<T>(), out.data<T>(), n, [=](C v) { return v * m + a; });
    });
  });
}

void pow_scalar(const Tensor& x, const Tensor& out, double p) {
  check_unary("pow_scalar", x, out);
  const int64_t n = x.numel();
  const LaunchCost cost = map_cost(x, 1);
  launch(cpu_launch_info("pow_scalar", n, cost.flops, cost.bytes), [&] {
    visit_element(x, "pow_scalar", [&]<class T>() {
      using C = compute_t<T>;
      // Squares are common (variances, norms) and need no pow call.
      if (p == 2) return map1(x.data<T>(), out.data<T>(), n, [](C v) { return v * v; });
      const C e = static_cast<C>(p);
      map1(x.data<T>(), out.data<T>(), n, [=](C v) { return std::pow(v, e); });
    });
  });
}

void gelu_forward(const Tensor& x, const Tensor& y) {
  check_unary("gelu_forward", x, y);
  const int64_t n = x.numel();
  const LaunchCost cost = map_cost(x, kGeluForwardFlops);
  launch(cpu_launch_info("gelu_forward", n, cost.flops, cost.bytes), [&] {
    visit_element(x, "gelu_forward", [&]<class T>() {
      using C = compute_t<T>;
      map1(x.data<T>(), y.data<T>(), n, [](C v) { return gelu_forward_of(v); });
    });
  });
}

void gelu_backward(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  check_unary("gelu_backward", x, dx);
  check_unary("gelu_backward", dy, dx);
  const int64_t n = x.numel();
  const LaunchCost cost = gelu_backward_cost(x);
  launch(cpu_launch_info("gelu_backward", n, cost.flops, cost.bytes), [&] {
    visit_element(x, "gelu_backward", [&]<class T>() {
      using C = compute_t<T>;
      map2(x.data<T>(), dy.data<T>(), dx.data<T>(), n,
           [](C v, C g) { return gelu_backward_of(v, g); });
    });
  });
}

void gelu_backward_of_bf16(const Tensor& x, const Tensor& dy, const Tensor& dx) {
  GLASS_CHECK(x.dtype() == DType::bf16 && dy.dtype() == DType::f32 && dx.dtype() == DType::f32,
              "gelu_backward_of_bf16: x must be bf16 and dy, dx f32 (got {}, {}, {})",
              dtype_name(x.dtype()), dtype_name(dy.dtype()), dtype_name(dx.dtype()));
  check_unary("gelu_backward_of_bf16", dy, dx);
  GLASS_CHECK(x.numel() == dx.numel() && x.is_contiguous(),
              "gelu_backward_of_bf16: x must be contiguous with dx's {} elements (got {})",
              dx.numel(), x.numel());
  const int64_t n = x.numel();
  const LaunchCost cost = gelu_backward_cost(dx);
  launch(cpu_launch_info("gelu_backward", n, cost.flops, cost.bytes), [&] {
    map2(x.data<bf16>(), dy.data<float>(), dx.data<float>(), n,
         [](float v, float g) { return gelu_backward_of(v, g); });
  });
}

void dropout_forward(const Tensor& x, const Tensor& y, double p, const PhiloxArgs& rng) {
  dropout("dropout_forward", x, y, p, rng);
}

// dx = dy * mask / (1 - p): the forward map applied to dy, with the mask regenerated.
void dropout_backward(const Tensor& dy, const Tensor& dx, double p, const PhiloxArgs& rng) {
  dropout("dropout_backward", dy, dx, p, rng);
}

}  // namespace glass::kernels::cpu
