// kernels/cuda/softmax.cu on emu against the cpu kernels: softmax, log-softmax and cross-entropy,
// forward and backward, on rows whose widths leave partial warps (1, 31, 33) and several warps per
// thread (1000); the device-side target check; determinism under shuffled thread order.
#include "engine/device_flags.h"
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

constexpr int64_t kSoftmaxRows = 37;
constexpr int64_t kIgnore = -100;
const int64_t kWidths[] = {1, 31, 33, 1000};

// Random targets in [0, V), every fifth row ignored.
Tensor random_targets(int64_t rows, int64_t V, Generator& gen) {
  const std::vector<float> u = to_vector<float>(rand({rows}, gen));
  std::vector<int32_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    t[r] = r % 5 == 3 ? static_cast<int32_t>(kIgnore)
                      : std::min(static_cast<int32_t>(u[r] * static_cast<float>(V)),
                                 static_cast<int32_t>(V - 1));
  return from_vector(t, {rows});
}

// One of the two row-wise pairs: forward and backward, on cpu and on the kernel device.
struct RowwisePair {
  const char* name;
  void (*cpu_forward)(const Tensor&, const Tensor&);
  void (*cpu_backward)(const Tensor&, const Tensor&, const Tensor&);
  void (*forward)(const Tensor&, const Tensor&);
  void (*backward)(const Tensor&, const Tensor&, const Tensor&);
};

const RowwisePair kPairs[] = {
    {"softmax", kernels::cpu::softmax_forward, kernels::cpu::softmax_backward,
     kernels::cuda::softmax_forward, kernels::cuda::softmax_backward},
    {"log_softmax", kernels::cpu::log_softmax_forward, kernels::cpu::log_softmax_backward,
     kernels::cuda::log_softmax_forward, kernels::cuda::log_softmax_backward},
};

TEST(CudaSoftmax, ForwardAndBackwardMatchCpu) {
  Generator gen(1);
  for (const RowwisePair& pair : kPairs)
    for (int64_t cols : kWidths) {
      SCOPED_TRACE(std::string(pair.name) + " cols " + std::to_string(cols));
      const Tensor x = randn({kSoftmaxRows, cols}, gen, 0, 3);
      const Tensor dy = randn({kSoftmaxRows, cols}, gen);
      const Tensor y_ref = empty_like(x), dx_ref = empty_like(x);
      pair.cpu_forward(x, y_ref);
      pair.cpu_backward(y_ref, dy, dx_ref);
      const Tensor y = device_empty(x.shape()), dx = device_empty(x.shape());
      pair.forward(on_device(x), y);
      pair.backward(on_device(y_ref), on_device(dy), dx);
      EXPECT_TRUE(all_close(to_cpu(y), y_ref, 1e-5));
      EXPECT_TRUE(all_close(to_cpu(dx), dx_ref, 1e-5));
    }
}

// Logits near 1000: the max shift and the split logsumexp keep log_softmax accurate.
TEST(CudaSoftmax, LogSoftmaxOfLargeLogits) {
  Generator gen(2);
  const Tensor x = randn({kSoftmaxRows, 1000}, gen, 1000, 1);
  const Tensor y_ref = empty_like(x);
  kernels::cpu::log_softmax_forward(x, y_ref);
  const Tensor y = device_empty(x.shape());
  kernels::cuda::log_softmax_forward(on_device(x), y);
  EXPECT_TRUE(all_close(to_cpu(y), y_ref, 1e-5));
}

TEST(CudaCrossEntropy, ForwardAndBackwardMatchCpu) {
  Generator gen(3);
  for (int64_t V : kWidths) {
    SCOPED_TRACE("V " + std::to_string(V));
    const Tensor logits = randn({kSoftmaxRows, V}, gen, 0, 4);
    const Tensor targets = random_targets(kSoftmaxRows, V, gen);
    const Tensor dlosses = randn({kSoftmaxRows}, gen);
    const Tensor losses_ref = empty_like(dlosses), lse_ref = empty_like(dlosses);
    const Tensor valid_ref = Tensor::empty({1}), dlogits_ref = empty_like(logits);
    kernels::cpu::cross_entropy_forward(logits, targets, losses_ref, lse_ref, valid_ref, kIgnore);
    kernels::cpu::cross_entropy_backward(logits, targets, lse_ref, dlosses, dlogits_ref, kIgnore);

    const Tensor d_logits = on_device(logits), d_targets = on_device(targets);
    const Tensor losses = device_empty({kSoftmaxRows}), lse = device_empty({kSoftmaxRows});
    const Tensor valid = device_empty({1}), dlogits = device_empty(logits.shape());
    kernels::cuda::cross_entropy_forward(d_logits, d_targets, losses, lse, valid, kIgnore);
    kernels::cuda::cross_entropy_backward(d_logits, d_targets, on_device(lse_ref),
                                          on_device(dlosses), dlogits, kIgnore);
    EXPECT_TRUE(all_close(to_cpu(losses), losses_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(lse), lse_ref, 1e-5));
    EXPECT_EQ(to_vector<float>(to_cpu(valid)), std::vector<float>{30.0f});  // 37 - 7 ignored
    EXPECT_EQ(to_vector<float>(valid_ref), std::vector<float>{30.0f});
    EXPECT_TRUE(all_close(to_cpu(dlogits), dlogits_ref, 1e-5));
  }
}

// A kernel cannot throw: the check kernel raises a device flag for the first bad row, which the
// next host read turns into an error naming row and value; nothing reads out of bounds meanwhile.
TEST(CudaCrossEntropy, BadTargetThrowsNamingRowAndValue) {
  Generator gen(4);
  const int64_t V = 33;
  const Tensor logits = on_device(randn({kSoftmaxRows, V}, gen));
  std::vector<int32_t> t(kSoftmaxRows, 1);
  t[11] = static_cast<int32_t>(V);  // first bad row
  t[20] = -7;
  t[3] = static_cast<int32_t>(kIgnore);
  const Tensor targets = on_device(from_vector(t, {kSoftmaxRows}));
  const Tensor losses = device_empty({kSoftmaxRows}), lse = device_empty({kSoftmaxRows});
  const Tensor valid = device_empty({1}), dlogits = device_empty({kSoftmaxRows, V});
  const std::string fwd = error_of([&] {
    kernels::cuda::cross_entropy_forward(logits, targets, losses, lse, valid, kIgnore);
    check_device_flags(logits.device());
  });
  EXPECT_TRUE(contains_all(fwd, {"cross_entropy_forward", "target 33 at row 11"}));
  t[11] = 0;
  const Tensor targets2 = on_device(from_vector(t, {kSoftmaxRows}));
  const std::string bwd = error_of([&] {
    kernels::cuda::cross_entropy_backward(logits, targets2, lse, losses, dlogits, kIgnore);
    check_device_flags(logits.device());
  });
  EXPECT_TRUE(contains_all(bwd, {"cross_entropy_backward", "target -7 at row 20"}));
}

TEST(CudaSoftmax, RejectsWrongDtypeAndSize) {
  const Tensor x64 = Tensor::empty({kSoftmaxRows, 5}, DType::f64, testing::kKernelDevice);
  std::string msg = error_of([&] { kernels::cuda::softmax_forward(x64, x64); });
  EXPECT_TRUE(contains_all(msg, {"softmax_forward", "f32"}));
  const Tensor x = device_empty({kSoftmaxRows, 5}), y = device_empty({kSoftmaxRows, 4});
  msg = error_of([&] { kernels::cuda::log_softmax_forward(x, y); });
  EXPECT_TRUE(contains_all(msg, {"log_softmax_forward", "[37, 4]"}));
}

TEST(CudaSoftmax, BitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(5);
  const int64_t V = 1000;
  const Tensor x = on_device(randn({kSoftmaxRows, V}, gen, 0, 3));
  const Tensor dy = on_device(randn({kSoftmaxRows, V}, gen));
  const Tensor targets = on_device(random_targets(kSoftmaxRows, V, gen));
  const Tensor y = device_empty(x.shape()), dx = device_empty(x.shape());
  const Tensor ly = device_empty(x.shape()), ldx = device_empty(x.shape());
  const Tensor losses = device_empty({kSoftmaxRows}), lse = device_empty({kSoftmaxRows});
  const Tensor valid = device_empty({1}), dlogits = device_empty(x.shape());
  const Tensor dlosses = on_device(randn({kSoftmaxRows}, gen));
  expect_deterministic({y, dx, ly, ldx, losses, lse, valid, dlogits}, [&] {
    kernels::cuda::softmax_forward(x, y);
    kernels::cuda::softmax_backward(y, dy, dx);
    kernels::cuda::log_softmax_forward(x, ly);
    kernels::cuda::log_softmax_backward(ly, dy, ldx);
    kernels::cuda::cross_entropy_forward(x, targets, losses, lse, valid, kIgnore);
    kernels::cuda::cross_entropy_backward(x, targets, lse, dlosses, dlogits, kIgnore);
  });
}

}  // namespace
}  // namespace glass
