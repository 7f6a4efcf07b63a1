// Every rung of the softmax and LayerNorm ladders and the RMSNorm pair on emu against the cpu
// kernels: random inputs, rows that leave partial warps and blocks (1, 45, 1031 columns; 37 rows),
// row lengths that are not a multiple of 4, rows starting off 16-byte bounds, x and y misaligned
// against each other (the float4 rungs fall back to scalars), bit-identical results under shuffled
// thread order, and each rung launching the kernel the registry names. The RMSNorm rungs also run
// bf16, against the cpu's f32 on the same bf16-rounded values.
#include "tests/ladder/ladder_test.h"

namespace glass {
namespace {

using kernels::ladder::Op;
using kernels::ladder::Rung;
using kernels::ladder::rungs;
using testing::all_close;
using testing::device_at_offset;
using testing::device_empty;
using testing::on_device;
using testing::to_cpu;

const Shape kShapes[] = {{37, 45}, {5, 1}, {3, 1031}, {2, 3, 8}};
constexpr double kEps = 1e-5;

std::string trace(const Rung& r, const Shape& shape) {
  return fmt::format("rung {} ({}) shape [{}]", r.index, r.name, fmt::join(shape, ", "));
}

// Runs softmax rung r on x (emu) into y; expects one launch of the rung's kernel and y close to
// the cpu result.
void expect_softmax_rung(const Rung& r, const Tensor& x_cpu, const Tensor& x, const Tensor& y) {
  const Tensor y_ref = empty_like(x_cpu);
  kernels::cpu::softmax_forward(x_cpu, y_ref);
  testing::LaunchLog log;
  kernels::ladder::run_softmax_forward(r.index, x, y);
  EXPECT_EQ(log.kernels(), std::vector<std::string>{r.kernel});
  EXPECT_TRUE(all_close(to_cpu(y), y_ref, 1e-6));
}

TEST(SoftmaxLadder, EveryRungMatchesCpu) {
  Generator gen(1);
  for (const Shape& shape : kShapes) {
    const Tensor x = randn(shape, gen, 0, 3);
    for (const Rung& r : rungs(Op::softmax)) {
      SCOPED_TRACE(trace(r, shape));
      expect_softmax_rung(r, x, on_device(x), device_empty(shape));
    }
  }
}

// x and y at offsets 1 and 1 (aligned alike: a scalar head of 3, then float4s) and 1 and 2
// (never aligned together: all scalar).
TEST(SoftmaxLadder, RowsOffSixteenByteBounds) {
  Generator gen(2);
  const Tensor x = randn({7, 45}, gen, 0, 3);
  for (const auto& [x_offset, y_offset] : {std::pair{1, 1}, std::pair{1, 2}}) {
    const Tensor dx = device_at_offset(7, 45, x_offset);
    kernels::cuda::copy(on_device(x), dx);
    for (const Rung& r : rungs(Op::softmax)) {
      SCOPED_TRACE(trace(r, x.shape()) + fmt::format(" offsets {} {}", x_offset, y_offset));
      expect_softmax_rung(r, x, dx, device_at_offset(7, 45, y_offset));
    }
  }
}

struct LayerNormInputs {
  Tensor x, weight, bias;
  LayerNormInputs(const Shape& shape, Generator& gen)
      : x(randn(shape, gen, 1, 2)),
        weight(randn({shape.back()}, gen)),
        bias(randn({shape.back()}, gen)) {}
};

// Runs LayerNorm rung r on the inputs (emu, x given) into y; expects one launch of the rung's
// kernel and y, mean and rstd close to the cpu results.
void expect_layernorm_rung(const Rung& r, const LayerNormInputs& in, const Tensor& x,
                           const Tensor& y) {
  const int64_t rows = in.x.numel() / in.x.size(-1);
  const Tensor y_ref = empty_like(in.x), mean_ref = Tensor::empty({rows}),
               rstd_ref = Tensor::empty({rows});
  kernels::cpu::layernorm_forward(in.x, in.weight, in.bias, y_ref, mean_ref, rstd_ref, kEps);
  const Tensor mean = device_empty({rows}), rstd = device_empty({rows});
  testing::LaunchLog log;
  kernels::ladder::run_layernorm_forward(r.index, x, on_device(in.weight), on_device(in.bias), y,
                                         mean, rstd, kEps);
  EXPECT_EQ(log.kernels(), std::vector<std::string>{r.kernel});
  EXPECT_TRUE(all_close(to_cpu(y), y_ref, 1e-5));
  EXPECT_TRUE(all_close(to_cpu(mean), mean_ref, 1e-5));
  EXPECT_TRUE(all_close(to_cpu(rstd), rstd_ref, 1e-5));
}

TEST(LayerNormLadder, EveryRungMatchesCpu) {
  Generator gen(3);
  for (const Shape& shape : kShapes) {
    const LayerNormInputs in(shape, gen);
    for (const Rung& r : rungs(Op::layernorm)) {
      SCOPED_TRACE(trace(r, shape));
      expect_layernorm_rung(r, in, on_device(in.x), device_empty(shape));
    }
  }
}

TEST(LayerNormLadder, RowsOffSixteenByteBounds) {
  Generator gen(4);
  const LayerNormInputs in({7, 45}, gen);
  for (const auto& [x_offset, y_offset] : {std::pair{1, 1}, std::pair{3, 2}}) {
    const Tensor dx = device_at_offset(7, 45, x_offset);
    kernels::cuda::copy(on_device(in.x), dx);
    for (const Rung& r : rungs(Op::layernorm)) {
      SCOPED_TRACE(trace(r, in.x.shape()) + fmt::format(" offsets {} {}", x_offset, y_offset));
      expect_layernorm_rung(r, in, dx, device_at_offset(7, 45, y_offset));
    }
  }
}

struct RmsNormInputs {
  Tensor x, weight;  // f32 holding values that bf16 represents exactly
  RmsNormInputs(const Shape& shape, Generator& gen)
      : x(cast(cast(randn(shape, gen, 0.5, 2), DType::bf16), DType::f32)),
        weight(cast(cast(randn({shape.back()}, gen, 1, 0.5), DType::bf16), DType::f32)) {}
};

// A bf16 store rounds to 8 significant bits, at most 2^-9 relative (to nearest): y within one unit
// of 2^-8 of the reference's largest magnitude; rstd is f32 in both dtypes, from the same values.
constexpr double kBf16Unit = 1.0 / 256;

// Runs RMSNorm rung r (emu) on x (given, of `dtype`) into y; expects one launch of the rung's
// kernel and y and rstd close to the cpu's f32 results on the same values.
void expect_rmsnorm_rung(const Rung& r, const RmsNormInputs& in, DType dtype, const Tensor& x,
                         const Tensor& y) {
  const int64_t rows = in.x.numel() / in.x.size(-1);
  const Tensor y_ref = empty_like(in.x), rstd_ref = Tensor::empty({rows});
  kernels::cpu::rmsnorm_forward(in.x, in.weight, y_ref, rstd_ref, kEps);
  const Tensor rstd = device_empty({rows}), weight = on_device(cast(in.weight, dtype));
  testing::LaunchLog log;
  kernels::ladder::run_rmsnorm_forward(r.index, x, weight, y, rstd, kEps);
  EXPECT_EQ(log.kernels(), std::vector<std::string>{r.kernel});
  EXPECT_EQ(y.dtype(), dtype);
  EXPECT_TRUE(all_close(to_cpu(y), y_ref, dtype == DType::bf16 ? kBf16Unit : 1e-5));
  EXPECT_TRUE(all_close(to_cpu(rstd), rstd_ref, 1e-5));
}

TEST(RmsNormLadder, EveryRungMatchesCpuInF32AndBf16) {
  Generator gen(6);
  for (const Shape& shape : kShapes) {
    const RmsNormInputs in(shape, gen);
    for (DType dtype : {DType::f32, DType::bf16})
      for (const Rung& r : rungs(Op::rmsnorm)) {
        SCOPED_TRACE(fmt::format("{} {}", trace(r, shape), dtype_name(dtype)));
        expect_rmsnorm_rung(r, in, dtype, on_device(cast(in.x, dtype)), device_empty(shape, dtype));
      }
  }
}

// x and y at offsets 1 and 1 (the production rung: a scalar head of 3, then vectors) and 3 and 2
// (never aligned together: all scalar).
TEST(RmsNormLadder, RowsOffSixteenByteBounds) {
  Generator gen(7);
  const RmsNormInputs in({7, 45}, gen);
  for (const auto& [x_offset, y_offset] : {std::pair{1, 1}, std::pair{3, 2}}) {
    const Tensor dx = device_at_offset(7, 45, x_offset);
    kernels::cuda::copy(on_device(in.x), dx);
    for (const Rung& r : rungs(Op::rmsnorm)) {
      SCOPED_TRACE(trace(r, in.x.shape()) + fmt::format(" offsets {} {}", x_offset, y_offset));
      expect_rmsnorm_rung(r, in, DType::f32, dx, device_at_offset(7, 45, y_offset));
    }
  }
}

TEST(RmsNormLadder, BitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(8);
  const RmsNormInputs in({37, 45}, gen);
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor x = on_device(cast(in.x, dtype)), weight = on_device(cast(in.weight, dtype));
    const Tensor y = device_empty({37, 45}, dtype), rstd = device_empty({37});
    for (const Rung& r : rungs(Op::rmsnorm)) {
      SCOPED_TRACE(fmt::format("{} {}", trace(r, in.x.shape()), dtype_name(dtype)));
      testing::expect_deterministic({y, rstd}, [&] {
        kernels::ladder::run_rmsnorm_forward(r.index, x, weight, y, rstd, kEps);
      });
    }
  }
}

TEST(RmsNormLadder, BadInputIsNamed) {
  const Tensor x = device_empty({4, 6});
  std::string msg = testing::error_of([&] {
    kernels::ladder::run_rmsnorm_forward(0, x, device_empty({5}), x, device_empty({4}), kEps);
  });
  EXPECT_TRUE(testing::contains_all(msg, {"rmsnorm_forward_naive", "[5]", "6 elements"}));
  // weight and y of x's dtype, rstd f32 (accum_dtype) for bf16 x
  const Tensor xb = device_empty({4, 6}, DType::bf16);
  msg = testing::error_of([&] {
    kernels::ladder::run_rmsnorm_forward(0, xb, device_empty({6}, DType::bf16), x,
                                         device_empty({4}), kEps);
  });
  EXPECT_TRUE(testing::contains_all(msg, {"rmsnorm_forward_naive", "must be contiguous bf16"}));
  msg = testing::error_of([&] {
    kernels::ladder::run_rmsnorm_forward(0, xb, device_empty({6}, DType::bf16), xb,
                                         device_empty({4}, DType::bf16), kEps);
  });
  EXPECT_TRUE(testing::contains_all(msg, {"rmsnorm_forward_naive", "must be contiguous f32"}));
  const Tensor xd = device_empty({4, 6}, DType::f64);
  msg = testing::error_of([&] {
    kernels::ladder::run_rmsnorm_forward(0, xd, device_empty({6}, DType::f64), xd,
                                         device_empty({4}, DType::f64), kEps);
  });
  EXPECT_TRUE(testing::contains_all(msg, {"rmsnorm_forward_naive", "f64", "f32 or bf16"}));
  msg = testing::error_of([&] {
    kernels::ladder::run_rmsnorm_forward(2, x, device_empty({6}), x, device_empty({4}), kEps);
  });
  EXPECT_TRUE(testing::contains_all(msg, {"rmsnorm has no rung 2", "0 naive, 1 vector"}));
  const Tensor on_cpu = Tensor::empty({4, 6});
  msg = testing::error_of([&] {
    kernels::cuda::rmsnorm_forward_naive(on_cpu, Tensor::empty({6}), on_cpu, Tensor::empty({4}),
                                         kEps);
  });
  EXPECT_TRUE(testing::contains_all(msg, {"rmsnorm_forward_naive", "emu or cuda"}));
}

TEST(RowwiseLadders, BitIdenticalAcrossRunsAndThreadOrders) {
  Generator gen(5);
  const LayerNormInputs in({37, 45}, gen);
  const Tensor x = on_device(in.x), weight = on_device(in.weight), bias = on_device(in.bias);
  const Tensor y = device_empty({37, 45}), mean = device_empty({37}), rstd = device_empty({37});
  for (int rung = 0; rung < kernels::ladder::kRungs; ++rung) {
    SCOPED_TRACE(fmt::format("rung {}", rung));
    testing::expect_deterministic({y}, [&] { kernels::ladder::run_softmax_forward(rung, x, y); });
    testing::expect_deterministic({y, mean, rstd}, [&] {
      kernels::ladder::run_layernorm_forward(rung, x, weight, bias, y, mean, rstd, kEps);
    });
  }
}

TEST(RowwiseLadders, BadInputIsNamed) {
  const Tensor x = device_empty({4, 6});
  std::string msg = testing::error_of([&] {
    kernels::ladder::run_softmax_forward(3, x, device_empty({4, 5}));
  });
  EXPECT_TRUE(testing::contains_all(msg, {"softmax_forward_float4", "[4, 5]", "[4, 6]"}));
  msg = testing::error_of([&] {
    kernels::ladder::run_layernorm_forward(1, x, device_empty({6}), device_empty({5}), x,
                                           device_empty({4}), device_empty({4}), kEps);
  });
  EXPECT_TRUE(testing::contains_all(msg, {"layernorm_forward_coalesced", "[5]", "6 elements"}));
  // the LayerNorm and softmax rungs are f32 only
  const Tensor xb = device_empty({4, 6}, DType::bf16);
  msg = testing::error_of([&] { kernels::ladder::run_softmax_forward(0, xb, xb); });
  EXPECT_TRUE(testing::contains_all(msg, {"softmax_forward_naive", "bf16", "f32 only"}));
  msg = testing::error_of([&] { kernels::ladder::run_softmax_forward(4, x, x); });
  EXPECT_TRUE(testing::contains_all(msg, {"softmax has no rung 4", "3 float4"}));
  const Tensor on_cpu = Tensor::empty({4, 6});
  msg = testing::error_of([&] { kernels::ladder::run_softmax_forward(0, on_cpu, on_cpu); });
  EXPECT_TRUE(testing::contains_all(msg, {"emu or cuda", "cpu"}));
  // The launcher itself refuses a cpu tensor even when called directly.
  msg = testing::error_of([&] { kernels::cuda::softmax_forward_naive(on_cpu, on_cpu); });
  EXPECT_TRUE(testing::contains_all(msg, {"softmax_forward_naive", "emu or cuda"}));
}

}  // namespace
}  // namespace glass
