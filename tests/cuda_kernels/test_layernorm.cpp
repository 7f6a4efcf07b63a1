// kernels/cuda/layernorm.cu on emu against the cpu kernels: forward (y, mean, rstd) and backward
// (dx, dweight, dbias) on 37 rows (two row chunks, the second partial) of widths that leave partial
// warps (1, 31, 33) and several columns per thread (1000); shape errors; determinism under
// shuffled thread order.
#include <algorithm>
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

constexpr int64_t kRows = 37;
constexpr double kEps = 1e-5;

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : testing::values(t)) m = std::max(m, std::abs(v));
  return m;
}

// Inputs of one LayerNorm, on cpu.
struct Inputs {
  Tensor x, weight, bias, dy;
  Inputs(int64_t rows, int64_t C, Generator& gen)
      : x(randn({rows, C}, gen, 0.5, 2)),
        weight(randn({C}, gen, 1, 0.5)),
        bias(randn({C}, gen)),
        dy(randn({rows, C}, gen)) {}
};

TEST(CudaLayerNorm, ForwardAndBackwardMatchCpu) {
  Generator gen(11);
  for (int64_t C : {1, 31, 33, 1000}) {
    SCOPED_TRACE("C " + std::to_string(C));
    const Inputs in(kRows, C, gen);
    const Tensor y_ref = empty_like(in.x), dx_ref = empty_like(in.x);
    const Tensor mean_ref = Tensor::empty({kRows}), rstd_ref = Tensor::empty({kRows});
    const Tensor dw_ref = empty_like(in.weight), db_ref = empty_like(in.weight);
    kernels::cpu::layernorm_forward(in.x, in.weight, in.bias, y_ref, mean_ref, rstd_ref, kEps);
    kernels::cpu::layernorm_backward(in.dy, in.x, in.weight, mean_ref, rstd_ref, dx_ref, dw_ref,
                                     db_ref);

    const Tensor x = on_device(in.x), weight = on_device(in.weight);
    const Tensor y = device_empty(in.x.shape()), dx = device_empty(in.x.shape());
    const Tensor mean = device_empty({kRows}), rstd = device_empty({kRows});
    const Tensor dw = device_empty({C}), db = device_empty({C});
    kernels::cuda::layernorm_forward(x, weight, on_device(in.bias), y, mean, rstd, kEps);
    kernels::cuda::layernorm_backward(on_device(in.dy), x, weight, mean, rstd, dx, dw, db);
    EXPECT_TRUE(all_close(to_cpu(y), y_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(mean), mean_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(rstd), rstd_ref, 1e-5));
    // dx = rstd * (dxhat - means) cancels terms of size rstd * |dy * w| (exactly, for C = 1,
    // where the cpu's fused multiply-adds leave rounding noise): its error scales with them.
    const double terms = max_abs(rstd_ref) * max_abs(in.dy) * max_abs(in.weight);
    EXPECT_TRUE(all_close(to_cpu(dx), dx_ref, 1e-5, 1e-6 * terms));
    EXPECT_TRUE(all_close(to_cpu(dw), dw_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(db), db_ref, 1e-5));
  }
}

TEST(CudaLayerNorm, RejectsMismatchedShapes) {
  const Tensor x = device_empty({kRows, 8}), w = device_empty({8}), w7 = device_empty({7});
  const Tensor mean = device_empty({kRows}), rstd = device_empty({kRows});
  const std::string msg =
      error_of([&] { kernels::cuda::layernorm_forward(x, w7, w, x, mean, rstd, kEps); });
  EXPECT_TRUE(contains_all(msg, {"layernorm_forward", "f32[7]"}));
  const Tensor x64 = Tensor::empty({kRows, 8}, DType::f64, testing::kKernelDevice);
  const std::string dtype_msg =
      error_of([&] { kernels::cuda::layernorm_backward(x64, x, w, mean, rstd, x, w, w); });
  EXPECT_TRUE(contains_all(dtype_msg, {"layernorm_backward", "f64[37, 8]"}));
}

TEST(CudaLayerNorm, BitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(12);
  const int64_t rows = 100, C = 333;
  const Inputs in(rows, C, gen);
  const Tensor x = on_device(in.x), weight = on_device(in.weight), bias = on_device(in.bias);
  const Tensor dy = on_device(in.dy);
  const Tensor y = device_empty(in.x.shape()), dx = device_empty(in.x.shape());
  const Tensor mean = device_empty({rows}), rstd = device_empty({rows});
  const Tensor dw = device_empty({C}), db = device_empty({C});
  expect_deterministic({y, mean, rstd, dx, dw, db}, [&] {
    kernels::cuda::layernorm_forward(x, weight, bias, y, mean, rstd, kEps);
    kernels::cuda::layernorm_backward(dy, x, weight, mean, rstd, dx, dw, db);
  });
}

}  // namespace
}  // namespace glass
