// kernels/cuda/attention.cu on emu against the cpu kernels: causal attention forward (out, probs
// with exact zeros above the diagonal) and backward (dq, dk, dv) for B=2 H=3 T=37 D=16 (partial
// warps over keys) and B=1 H=1 T=5 D=4 (blocks mostly idle); shape errors; determinism under
// shuffled thread order.
#include <cmath>

#include "tests/cuda_kernels/kernel_test.h"

namespace glass {
namespace {

using testing::all_close;
using testing::contains_all;
using testing::device_empty;
using testing::error_of;
using testing::expect_deterministic;
using testing::on_device;
using testing::to_cpu;

struct Case {
  int64_t B, H, T, D;
};

TEST(CudaAttention, ForwardAndBackwardMatchCpu) {
  Generator gen(21);
  for (const Case c : {Case{2, 3, 37, 16}, Case{1, 1, 5, 4}}) {
    SCOPED_TRACE("T " + std::to_string(c.T) + " D " + std::to_string(c.D));
    const Shape shape{c.B, c.H, c.T, c.D}, probs_shape{c.B, c.H, c.T, c.T};
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    const Tensor q = randn(shape, gen, 0, 2), k = randn(shape, gen, 0, 2), v = randn(shape, gen);
    const Tensor dout = randn(shape, gen);
    const Tensor out_ref = empty_like(q), probs_ref = Tensor::empty(probs_shape);
    const Tensor dq_ref = empty_like(q), dk_ref = empty_like(q), dv_ref = empty_like(q);
    kernels::cpu::attention_forward(q, k, v, out_ref, probs_ref, scale);
    kernels::cpu::attention_backward(q, k, v, probs_ref, dout, dq_ref, dk_ref, dv_ref, scale);

    const Tensor dev_q = on_device(q), dev_k = on_device(k), dev_v = on_device(v);
    const Tensor out = device_empty(shape), probs = device_empty(probs_shape);
    const Tensor dq = device_empty(shape), dk = device_empty(shape), dv = device_empty(shape);
    kernels::cuda::attention_forward(dev_q, dev_k, dev_v, out, probs, scale);
    kernels::cuda::attention_backward(dev_q, dev_k, dev_v, on_device(probs_ref), on_device(dout),
                                      dq, dk, dv, scale);
    EXPECT_TRUE(all_close(to_cpu(out), out_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(probs), probs_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(dq), dq_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(dk), dk_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(dv), dv_ref, 1e-5));
    // the causal mask: exact zeros above the diagonal
    const std::vector<float> p = to_vector<float>(to_cpu(probs));
    for (int64_t row = 0; row < c.B * c.H * c.T; ++row)
      for (int64_t j = row % c.T + 1; j < c.T; ++j) ASSERT_EQ(p[row * c.T + j], 0.0f) << row;
  }
}

TEST(CudaAttention, RejectsMismatchedShapes) {
  const Tensor q = device_empty({2, 3, 5, 4}), probs = device_empty({2, 3, 5, 4});
  std::string msg = error_of([&] { kernels::cuda::attention_forward(q, q, q, q, probs, 0.5); });
  EXPECT_TRUE(contains_all(msg, {"attention_forward", "probs f32[2, 3, 5, 4]"}));
  const Tensor k = device_empty({2, 3, 6, 4}), p = device_empty({2, 3, 5, 5});
  msg = error_of([&] { kernels::cuda::attention_backward(q, k, q, p, q, q, q, q, 0.5); });
  EXPECT_TRUE(contains_all(msg, {"attention_backward", "f32[2, 3, 6, 4]"}));
}

TEST(CudaAttention, BitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(22);
  const Shape shape{2, 3, 37, 16}, probs_shape{2, 3, 37, 37};
  const Tensor q = on_device(randn(shape, gen)), k = on_device(randn(shape, gen));
  const Tensor v = on_device(randn(shape, gen)), dout = on_device(randn(shape, gen));
  const Tensor out = device_empty(shape), probs = device_empty(probs_shape);
  const Tensor dq = device_empty(shape), dk = device_empty(shape), dv = device_empty(shape);
  expect_deterministic({out, probs, dq, dk, dv}, [&] {
    kernels::cuda::attention_forward(q, k, v, out, probs, 0.25);
    kernels::cuda::attention_backward(q, k, v, probs, dout, dq, dk, dv, 0.25);
  });
}

}  // namespace
}  // namespace glass
