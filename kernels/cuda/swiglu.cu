// CUDA kernels for SwiGLU's activation (Llama's MLP) on the fused gate/up projection, with their
// host launchers: gate_up [N, 2F] (gate = columns [0, F), up = columns [F, 2F)), out [N, F]
// (contracts in kernels/kernel_list.inc; the cpu reference is kernels/cpu/swiglu.cpp).
//
//   forward:  out = silu(gate) * up,  silu(g) = g s,  s = sigmoid(g) = 1 / (1 + e^-g)
//   backward: dgate = dout * up * silu'(gate),  silu'(g) = s (1 + g (1 - s)),
//             dup = dout * silu(gate)          (both written into one dgate_up [N, 2F])
//
// Thread mapping: one thread per output element, or per 16-byte vector of outputs
// (kernels/cuda/vector_row.h) when F is a multiple of the vector width and every array is 16-byte
// aligned (then every row's gate, up and out start on a vector boundary); 256 threads per block.
// Consecutive threads take consecutive columns of a row, so the gate, the up and the out reads and
// writes are each coalesced. Elements are f32, bf16 (math in f32, each output rounded once) or
// f64.
#include "kernels/costs/swiglu.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/vector_row.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr unsigned kSwigluThreads = 256;

__device__ inline float swiglu_exp(float x) { return expf(x); }
__device__ inline double swiglu_exp(double x) { return exp(x); }

template <class C>
__device__ C swiglu_sigmoid(C g) {  // sigmoid(g)
  return C(1) / (C(1) + swiglu_exp(-g));
}

// out = silu(gate) * up, for unit u of `units` (an element, or a vector of W elements).
template <class T>
__global__ void swiglu_forward_kernel(const T* gate_up, T* out, int64_t F, int64_t units,
                                      bool vectorised) {
  using C = compute_t<T>;
  constexpr int W = kVecWidth<T>;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= units) return;
  auto silu_times_up = [](T g, T up) {
    const C gc = to_compute(g);
    return from_compute<T>(gc * swiglu_sigmoid(gc) * to_compute(up));
  };
  const int64_t per_row = vectorised ? F / W : F;
  const int64_t r = u / per_row, j = (u % per_row) * (vectorised ? W : 1);
  const T* gate = gate_up + r * 2 * F + j;
  T* o = out + r * F + j;
  if (vectorised) {
    const Vec<T> g = load_vec(gate), up = load_vec(gate + F);
    Vec<T> y;
    for (int k = 0; k < W; ++k) y.v[k] = silu_times_up(g.v[k], up.v[k]);
    store_vec(o, y);
    return;
  }
  *o = silu_times_up(gate[0], gate[F]);
}

// dgate = dout up silu'(gate), dup = dout silu(gate), for unit u as above.
template <class T>
__global__ void swiglu_backward_kernel(const T* gate_up, const T* dout, T* dgate_up, int64_t F,
                                       int64_t units, bool vectorised) {
  using C = compute_t<T>;
  constexpr int W = kVecWidth<T>;
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= units) return;
  // {dgate, dup} of one element
  auto grads = [](T g, T up, T dy, T& dgate, T& dup) {
    const C gc = to_compute(g), uc = to_compute(up), dyc = to_compute(dy);
    const C s = swiglu_sigmoid(gc);
    dgate = from_compute<T>(dyc * uc * s * (C(1) + gc * (C(1) - s)));
    dup = from_compute<T>(dyc * gc * s);
  };
  const int64_t per_row = vectorised ? F / W : F;
  const int64_t r = u / per_row, j = (u % per_row) * (vectorised ? W : 1);
  const T* gate = gate_up + r * 2 * F + j;
  const T* dy = dout + r * F + j;
  T* dgate = dgate_up + r * 2 * F + j;
  if (vectorised) {
    const Vec<T> g = load_vec(gate), up = load_vec(gate + F), d = load_vec(dy);
    Vec<T> dg, du;
    for (int k = 0; k < W; ++k) grads(g.v[k], up.v[k], d.v[k], dg.v[k], du.v[k]);
    store_vec(dgate, dg);
    store_vec(dgate + F, du);
    return;
  }
  grads(gate[0], gate[F], dy[0], dgate[0], dgate[F]);
}

// The launch of `kernel` over the units of out [rows, F].
template <class... Params, class... Args>
void launch_swiglu(const char* name, const Tensor& on, int64_t units, LaunchCost cost,
                   void (*kernel)(Params...), Args&&... args) {
  const LaunchInfo info = kernel_launch_info(name, on, dim3(ceil_div(units, kSwigluThreads)),
                                             dim3(kSwigluThreads), 0, cost.flops, cost.bytes);
  launch_cuda_kernel(info, kernel, std::forward<Args>(args)...);
}

}  // namespace

void swiglu_forward(const Tensor& gate_up, const Tensor& out) {
  const SwigluShape g("swiglu_forward", gate_up, out);
  if (g.rows == 0) return;
  visit_element(out, "swiglu_forward", [&]<class T>() {
    const bool vectorised =
        g.F % kVecWidth<T> == 0 && all_vec_aligned(gate_up.data<T>(), out.data<T>());
    const int64_t units = g.rows * (vectorised ? g.F / kVecWidth<T> : g.F);
    launch_swiglu("swiglu_forward", out, units, swiglu_forward_cost(gate_up, out),
                  swiglu_forward_kernel<T>, gate_up.data<T>(), out.data<T>(), g.F, units,
                  vectorised);
  });
}

void swiglu_backward(const Tensor& gate_up, const Tensor& dout, const Tensor& dgate_up) {
  const SwigluShape g("swiglu_backward", gate_up, dout, &dgate_up);
  if (g.rows == 0) return;
  visit_element(dout, "swiglu_backward", [&]<class T>() {
    const bool vectorised = g.F % kVecWidth<T> == 0 &&
                            all_vec_aligned(gate_up.data<T>(), dout.data<T>(), dgate_up.data<T>());
    const int64_t units = g.rows * (vectorised ? g.F / kVecWidth<T> : g.F);
    launch_swiglu("swiglu_backward", dout, units, swiglu_backward_cost(gate_up, dout),
                  swiglu_backward_kernel<T>, gate_up.data<T>(), dout.data<T>(), dgate_up.data<T>(),
                  g.F, units, vectorised);
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
