// cpu kernels for SwiGLU's activation (Llama's MLP) on the fused gate/up projection:
// gate_up [N, 2F] (gate = columns [0, F), up = columns [F, 2F)), out [N, F].
//
//   forward:  out = silu(gate) * up,  silu(g) = g s,  s = sigmoid(g) = 1 / (1 + e^-g)
//   backward: dgate = dout * up * silu'(gate),  silu'(g) = s (1 + g (1 - s)),
//             dup = dout * silu(gate)          (both written into one dgate_up [N, 2F])
//
// Rows run in parallel, each row's loop vectorised (exp_vectorisable: libm's expf is a call per
// element). Every element is computed on its own, so the results do not depend on the threads.
#include "kernels/costs/swiglu.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

template <class T>
T swiglu_sigmoid(T g) {  // sigmoid(g)
  return T(1) / (T(1) + exp_vectorisable(-g));
}

}  // namespace

void swiglu_forward(const Tensor& gate_up, const Tensor& out) {
  const SwigluShape g("swiglu_forward", gate_up, out);
  const LaunchCost cost = swiglu_forward_cost(gate_up, out);
  launch(cpu_launch_info("swiglu_forward", g.rows, cost.flops, cost.bytes), [&] {
    visit_element(out, "swiglu_forward", [&]<class T>() {
      const T* in = gate_up.data<T>();
      T* o = out.data<T>();
      const int64_t F = g.F;
      for_each_row(g.rows, out.numel(), [&](int64_t r) {
        const T* gate = in + r * 2 * F;
        const T* up = gate + F;
        T* y = o + r * F;
#pragma omp simd
        for (int64_t j = 0; j < F; ++j) {
          const auto gj = to_compute(gate[j]);
          y[j] = from_compute<T>(gj * swiglu_sigmoid(gj) * to_compute(up[j]));
        }
      });
    });
  });
}

void swiglu_backward(const Tensor& gate_up, const Tensor& dout, const Tensor& dgate_up) {
  const SwigluShape g("swiglu_backward", gate_up, dout, &dgate_up);
  const LaunchCost cost = swiglu_backward_cost(gate_up, dout);
  launch(cpu_launch_info("swiglu_backward", g.rows, cost.flops, cost.bytes), [&] {
    visit_element(dout, "swiglu_backward", [&]<class T>() {
      using A = compute_t<T>;
      const T* in = gate_up.data<T>();
      const T* dy = dout.data<T>();
      T* d = dgate_up.data<T>();
      const int64_t F = g.F;
      for_each_row(g.rows, dout.numel(), [&](int64_t r) {
        const T* gate = in + r * 2 * F;
        const T* up = gate + F;
        const T* dyr = dy + r * F;
        T* dgate = d + r * 2 * F;
        T* dup = dgate + F;
#pragma omp simd
        for (int64_t j = 0; j < F; ++j) {
          const A gj = to_compute(gate[j]), dyj = to_compute(dyr[j]);
          const A s = swiglu_sigmoid(gj);
          dgate[j] = from_compute<T>(dyj * to_compute(up[j]) * s * (A(1) + gj * (A(1) - s)));
          dup[j] = from_compute<T>(dyj * gj * s);
        }
      });
    });
  });
}

}  // namespace glass::kernels::cpu
