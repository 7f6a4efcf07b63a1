// kernels/cuda/layernorm.cu on emu against the cpu kernels: forward (y, mean, rstd) and backward
// (dx, dweight, dbias) on 37 rows (two row chunks, the second partial) of widths that leave partial
// warps (1, 31, 33) and several columns per thread (1000); shape errors; determinism under
// shuffled thread order.
// The fused residual add + LayerNorm (residual_layernorm_*) likewise, in f32 and in bf16 (against
// the cpu's f32 on the same bf16-rounded values, to tolerances counted in bf16 roundings).
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

constexpr int64_t kLayerNormRows = 37;
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
    const Inputs in(kLayerNormRows, C, gen);
    const Tensor y_ref = empty_like(in.x), dx_ref = empty_like(in.x);
    const Tensor mean_ref = Tensor::empty({kLayerNormRows}),
                 rstd_ref = Tensor::empty({kLayerNormRows});
    const Tensor dw_ref = empty_like(in.weight), db_ref = empty_like(in.weight);
    kernels::cpu::layernorm_forward(in.x, in.weight, in.bias, y_ref, mean_ref, rstd_ref, kEps);
    kernels::cpu::layernorm_backward(in.dy, in.x, in.weight, mean_ref, rstd_ref, dx_ref, dw_ref,
                                     db_ref);

    const Tensor x = on_device(in.x), weight = on_device(in.weight);
    const Tensor y = device_empty(in.x.shape()), dx = device_empty(in.x.shape());
    const Tensor mean = device_empty({kLayerNormRows}), rstd = device_empty({kLayerNormRows});
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
  const Tensor x = device_empty({kLayerNormRows, 8}), w = device_empty({8}), w7 = device_empty({7});
  const Tensor mean = device_empty({kLayerNormRows}), rstd = device_empty({kLayerNormRows});
  const std::string msg =
      error_of([&] { kernels::cuda::layernorm_forward(x, w7, w, x, mean, rstd, kEps); });
  EXPECT_TRUE(contains_all(msg, {"layernorm_forward", "f32[7]"}));
  const Tensor x64 = Tensor::empty({kLayerNormRows, 8}, DType::f64, testing::kKernelDevice);
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

// Inputs of one fused residual add + LayerNorm, on cpu: the stream x, the branch's delta, and the
// gradients arriving at both outputs.
struct ResidualInputs : Inputs {
  Tensor delta, dresidual;
  ResidualInputs(int64_t rows, int64_t C, Generator& gen)
      : Inputs(rows, C, gen),
        delta(randn({rows, C}, gen, -0.25, 1)),
        dresidual(randn({rows, C}, gen)) {}
};

// The cpu kernels' outputs and gradients: residual, y, mean, rstd, dx, dweight, dbias.
std::vector<Tensor> cpu_residual_layernorm(const ResidualInputs& in) {
  const int64_t rows = in.x.size(0);
  std::vector<Tensor> out{empty_like(in.x),      empty_like(in.x), Tensor::empty({rows}),
                          Tensor::empty({rows}), empty_like(in.x), empty_like(in.weight),
                          empty_like(in.weight)};
  kernels::cpu::residual_layernorm_forward(in.x, in.delta, in.weight, in.bias, out[0], out[1],
                                           out[2], out[3], kEps);
  kernels::cpu::residual_layernorm_backward(in.dy, in.dresidual, out[0], in.weight, out[2], out[3],
                                            out[4], out[5], out[6]);
  return out;
}

// The same on the kernel device, every tensor of `dtype` (statistics f32).
std::vector<Tensor> device_residual_layernorm(const ResidualInputs& in, DType dtype) {
  auto dev = [&](const Tensor& t) { return on_device(cast(t, dtype)); };
  const int64_t rows = in.x.size(0), C = in.x.size(1);
  std::vector<Tensor> out{device_empty({rows, C}, dtype), device_empty({rows, C}, dtype),
                          device_empty({rows}),           device_empty({rows}),
                          device_empty({rows, C}, dtype), device_empty({C}, dtype),
                          device_empty({C}, dtype)};
  const Tensor weight = dev(in.weight);
  kernels::cuda::residual_layernorm_forward(dev(in.x), dev(in.delta), weight, dev(in.bias), out[0],
                                            out[1], out[2], out[3], kEps);
  kernels::cuda::residual_layernorm_backward(dev(in.dy), dev(in.dresidual), out[0], weight, out[2],
                                             out[3], out[4], out[5], out[6]);
  return out;
}

const char* const kResidualOutputs[] = {"residual", "y", "mean", "rstd", "dx", "dweight", "dbias"};

TEST(CudaResidualLayerNorm, F32MatchesCpu) {
  Generator gen(13);
  for (int64_t C : {1, 31, 33, 1000}) {
    SCOPED_TRACE("C " + std::to_string(C));
    const ResidualInputs in(kLayerNormRows, C, gen);
    const std::vector<Tensor> ref = cpu_residual_layernorm(in);
    const std::vector<Tensor> got = device_residual_layernorm(in, DType::f32);
    // As for layer_norm: dx's cancellation error scales with rstd * |dy * w|.
    const double terms = max_abs(ref[3]) * max_abs(in.dy) * max_abs(in.weight);
    for (size_t i = 0; i < ref.size(); ++i)
      EXPECT_TRUE(all_close(to_cpu(got[i]), ref[i], 1e-5, i == 4 ? 1e-6 * terms : 0))
          << kResidualOutputs[i];
  }
}

// bf16 on the device against f32 on cpu from the same bf16-rounded inputs. A bf16 store rounds to
// 8 significant bits: at most 2^-8 relative (half of it, round to nearest). Per output, in units of
// 2^-8 of the reference's largest magnitude:
//   residual  1: one rounding of x + delta.
//   y         4: y's own rounding, plus the residual's rounding error carried through the
//               normalisation: |ds| <= 2^-9 |s| becomes |ds| rstd |w| in y, and |s| rstd stays
//               within a few units here (mean 0.25, std ~2.2, so |s| rstd < 3), against max|y| of
//               the same order.
//   mean, rstd 1: f32 statistics of the rounded residual (the same argument, no store).
//   dx        4: the rounding of dx itself, and the residual's rounding in xhat (as for y).
//   dweight, dbias 4: f32 sums over the rows of products of rounded values, rounded once.
constexpr double kBf16Unit = 1.0 / 256;
constexpr double kBf16Units[] = {1, 4, 1, 1, 4, 4, 4};

TEST(CudaResidualLayerNorm, Bf16MatchesCpuWithinBf16Rounding) {
  Generator gen(14);
  for (int64_t C : {31, 33, 1000}) {
    SCOPED_TRACE("C " + std::to_string(C));
    ResidualInputs in(kLayerNormRows, C, gen);
    for (Tensor* t : {&in.x, &in.delta, &in.weight, &in.bias, &in.dy, &in.dresidual})
      *t = cast(cast(*t, DType::bf16), DType::f32);  // both sides start from the same values
    const std::vector<Tensor> ref = cpu_residual_layernorm(in);
    const std::vector<Tensor> got = device_residual_layernorm(in, DType::bf16);
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(got[i].dtype(), i == 2 || i == 3 ? DType::f32 : DType::bf16);
      EXPECT_TRUE(all_close(to_cpu(got[i]), ref[i], kBf16Units[i] * kBf16Unit))
          << kResidualOutputs[i];
    }
  }
}

TEST(CudaResidualLayerNorm, BitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(15);
  const int64_t rows = 40, C = 333;  // two row chunks, the second partial
  const ResidualInputs in(rows, C, gen);
  for (DType dtype : {DType::f32, DType::bf16}) {
    auto dev = [&](const Tensor& t) { return on_device(cast(t, dtype)); };
    const Tensor x = dev(in.x), delta = dev(in.delta), weight = dev(in.weight), bias = dev(in.bias),
                 dy = dev(in.dy), dres = dev(in.dresidual);
    const Tensor s = device_empty({rows, C}, dtype), y = device_empty({rows, C}, dtype);
    const Tensor dx = device_empty({rows, C}, dtype);
    const Tensor mean = device_empty({rows}), rstd = device_empty({rows});
    const Tensor dw = device_empty({C}, dtype), db = device_empty({C}, dtype);
    expect_deterministic({s, y, mean, rstd, dx, dw, db}, [&] {
      kernels::cuda::residual_layernorm_forward(x, delta, weight, bias, s, y, mean, rstd, kEps);
      kernels::cuda::residual_layernorm_backward(dy, dres, s, weight, mean, rstd, dx, dw, db);
    });
  }
}

TEST(CudaResidualLayerNorm, RejectsMismatchedShapes) {
  const Tensor x = device_empty({kLayerNormRows, 8}), w = device_empty({8});
  const Tensor mean = device_empty({kLayerNormRows}), rstd = device_empty({kLayerNormRows});
  const Tensor short_delta = device_empty({kLayerNormRows, 7});
  const std::string msg = error_of([&] {
    kernels::cuda::residual_layernorm_forward(x, short_delta, w, w, x, x, mean, rstd, kEps);
  });
  EXPECT_TRUE(contains_all(msg, {"residual_layernorm_forward", "f32[37, 7]"}));
  const std::string bwd = error_of([&] {
    kernels::cuda::residual_layernorm_backward(x, short_delta, x, w, mean, rstd, x, w, w);
  });
  EXPECT_TRUE(contains_all(bwd, {"residual_layernorm_backward", "f32[37, 7]"}));
}

}  // namespace
}  // namespace glass
