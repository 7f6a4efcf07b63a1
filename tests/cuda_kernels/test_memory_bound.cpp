// The memory-bound kernels of kernels/cuda on emu against the cpu kernels, on what their 16-byte
// vector path (kernels/cuda/vector_row.h) and their parallel reductions make special:
// - operands at an offset of one element (a view that is not 16-byte aligned) take the scalar
//   path and give the aligned operands' results; the emulator would throw on any misaligned
//   vector access, so a launcher that chose wrongly fails here;
// - embedding backward with a token repeated thousands of times (its run summed in segments by
//   separate warps, then combined in order): close to cpu, short runs bit-identical to cpu, the
//   same bits run to run;
// - LayerNorm's weight and bias gradients over many rows (a 2-D grid of column blocks x groups of
//   row chunks, then the groups combined in order): close to cpu, the same bits run to run;
// - cast and fill to i32 saturate (NaN -> 0) on cpu and emu alike (kernels/saturating_cast.h).
#include <climits>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "engine/launch.h"
#include "kernels/optim_math.h"
#include "tests/cuda_kernels/kernel_test.h"

namespace glass {
namespace {

using testing::all_close;
using testing::device_empty;
using testing::expect_deterministic;
using testing::on_device;
using testing::to_cpu;

// A copy of a cpu tensor on the kernel device, starting `offset` elements into its allocation (a
// contiguous view; offset 1 is never 16-byte aligned, as the allocation is).
Tensor on_device_at(const Tensor& host, int64_t offset) {
  const Tensor buffer = device_empty({host.numel() + offset}, host.dtype());
  const Tensor view = buffer.as_strided(host.shape(), contiguous_strides(host.shape()), offset);
  view.copy_from_host(contiguous(host).raw_data());
  return view;
}

// A fresh f32 copy (for the kernels that work in place).
Tensor copy_of(const Tensor& t) { return from_vector(to_vector<float>(t), t.shape()); }

Tensor device_empty_at(const Shape& shape, DType dtype, int64_t offset) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return device_empty({n + offset}, dtype).as_strided(shape, contiguous_strides(shape), offset);
}

// The names of the kernels launched while it lives, with their grids.
struct LaunchLog : LaunchObserver {
  std::vector<LaunchInfo> launches;
  LaunchLog() { subscribe(this); }
  ~LaunchLog() override { unsubscribe(this); }
  void on_launch_begin(const LaunchInfo& info) override { launches.push_back(info); }
  const LaunchInfo* find(const std::string& kernel) const {
    for (const LaunchInfo& i : launches)
      if (kernel == i.kernel) return &i;
    return nullptr;
  }
};

// --- (a) vector path and offsets

TEST(VectorPath, GeluAtAnOffsetMatchesCpuInF32AndBf16) {
  Generator gen(21);
  const int64_t n = 1003;  // a scalar tail after the vectors
  const Tensor x = randn({n}, gen), dy = randn({n}, gen);
  const Tensor y_ref = empty_like(x), dx_ref = empty_like(x);
  kernels::cpu::gelu_forward(x, y_ref);
  kernels::cpu::gelu_backward(x, dy, dx_ref);
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (int64_t offset : {0, 1}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " offset " + std::to_string(offset));
      const Tensor xd = on_device_at(cast(x, dtype), offset),
                   dyd = on_device_at(cast(dy, dtype), offset);
      const Tensor y = device_empty_at({n}, dtype, offset),
                   dx = device_empty_at({n}, dtype, offset);
      kernels::cuda::gelu_forward(xd, y);
      kernels::cuda::gelu_backward(xd, dyd, dx);
      // bf16: the inputs are rounded to bf16 here but not on cpu, and the outputs once more
      const double rtol = dtype == DType::f32 ? 1e-6 : 4.0 / 256;
      EXPECT_TRUE(all_close(to_cpu(y), y_ref, rtol));
      EXPECT_TRUE(all_close(to_cpu(dx), dx_ref, rtol));
    }
  }
  // operands at different offsets (x aligned, y not): still the scalar path
  const Tensor y = device_empty_at({n}, DType::f32, 3);
  kernels::cuda::gelu_forward(on_device(x), y);
  EXPECT_TRUE(all_close(to_cpu(y), y_ref, 1e-6));
}

TEST(VectorPath, BinaryOpsAtAnOffsetMatchCpu) {
  Generator gen(29);
  const Shape shape{7, 29};  // 203 elements: vectors and a scalar tail
  const Tensor a = randn(shape, gen), b = randn(shape, gen, 2, 1);
  for (kernels::BinaryOp op : {kernels::BinaryOp::mul, kernels::BinaryOp::div}) {
    const Tensor ref = Tensor::empty(shape);
    kernels::cpu::binary(op, a, b, ref);
    for (auto [a_offset, out_offset] : {std::pair{0, 0}, {1, 1}, {0, 1}}) {
      SCOPED_TRACE(std::string(kernels::binary_op_name(op)) + " offsets " +
                   std::to_string(a_offset) + ", " + std::to_string(out_offset));
      const Tensor out = device_empty_at(shape, DType::f32, out_offset);
      kernels::cuda::binary(op, on_device_at(a, a_offset), on_device_at(b, a_offset), out);
      EXPECT_TRUE(all_close(to_cpu(out), ref, 1e-6));
    }
  }
}

TEST(VectorPath, DropoutAtAnOffsetMatchesCpu) {
  Generator gen(31);
  const int64_t n = 203;  // 50 whole groups of four and a partial one
  const Tensor x = randn({n}, gen);
  const PhiloxArgs rng{.seed = 77, .offset = 5};
  const Tensor y_ref = Tensor::empty({n});
  kernels::cpu::dropout_forward(x, y_ref, 0.3, rng);
  for (int64_t offset : {0, 1}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    const Tensor y = device_empty_at({n}, DType::f32, offset);
    kernels::cuda::dropout_forward(on_device_at(x, offset), y, 0.3, rng);
    EXPECT_TRUE(all_close(to_cpu(y), y_ref, 1e-6));  // the same mask, the same scale
  }
}

TEST(VectorPath, LayerNormAtAnOffsetMatchesCpu) {
  Generator gen(22);
  const int64_t rows = 37, C = 64;  // whole vectors per row: aligned, the vector path everywhere
  const Tensor x = randn({rows, C}, gen, 0.5, 2), w = randn({C}, gen, 1, 0.5), b = randn({C}, gen);
  const Tensor dy = randn({rows, C}, gen);
  const Tensor y_ref = empty_like(x), dx_ref = empty_like(x), dw_ref = empty_like(w),
               db_ref = empty_like(w);
  const Tensor mean_ref = Tensor::empty({rows}), rstd_ref = Tensor::empty({rows});
  kernels::cpu::layernorm_forward(x, w, b, y_ref, mean_ref, rstd_ref, 1e-5);
  kernels::cpu::layernorm_backward(dy, x, w, mean_ref, rstd_ref, dx_ref, dw_ref, db_ref);
  // offset 1: every row starts one float past a boundary (a scalar head, vectors, a scalar tail
  // in forward; all scalar in backward); offset 2 for y only: forward's arrays disagree, scalar
  for (auto [x_offset, y_offset] : {std::pair{0, 0}, {1, 1}, {0, 2}}) {
    SCOPED_TRACE("offsets " + std::to_string(x_offset) + ", " + std::to_string(y_offset));
    const Tensor xd = on_device_at(x, x_offset), wd = on_device_at(w, x_offset),
                 bd = on_device_at(b, x_offset), dyd = on_device_at(dy, x_offset);
    const Tensor y = device_empty_at({rows, C}, DType::f32, y_offset),
                 dx = device_empty_at({rows, C}, DType::f32, y_offset);
    const Tensor mean = device_empty({rows}), rstd = device_empty({rows});
    const Tensor dw = device_empty_at({C}, DType::f32, y_offset),
                 db = device_empty_at({C}, DType::f32, y_offset);
    kernels::cuda::layernorm_forward(xd, wd, bd, y, mean, rstd, 1e-5);
    kernels::cuda::layernorm_backward(dyd, xd, wd, mean, rstd, dx, dw, db);
    EXPECT_TRUE(all_close(to_cpu(y), y_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(dx), dx_ref, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(dw), dw_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(db), db_ref, 1e-5));
  }
}

TEST(VectorPath, ResidualLayerNormAtAnOffsetMatchesCpuInF32AndBf16) {
  Generator gen(30);
  const int64_t rows = 9, C = 72;  // 72 bf16 = 9 vectors; 72 f32 = 18
  const Tensor x = randn({rows, C}, gen), delta = randn({rows, C}, gen, 0, 0.5);
  const Tensor w = randn({C}, gen, 1, 0.5), b = randn({C}, gen);
  const Tensor dy = randn({rows, C}, gen), dres = randn({rows, C}, gen);
  for (DType dtype : {DType::f32, DType::bf16}) {
    // the reference on the values the device holds (rounded to bf16 for bf16)
    auto held = [&](const Tensor& t) { return cast(cast(t, dtype), DType::f32); };
    const Tensor res_ref = Tensor::empty({rows, C}), y_ref = Tensor::empty({rows, C}),
                 dx_ref = Tensor::empty({rows, C}), dw_ref = Tensor::empty({C}),
                 db_ref = Tensor::empty({C});
    const Tensor mean_ref = Tensor::empty({rows}), rstd_ref = Tensor::empty({rows});
    kernels::cpu::residual_layernorm_forward(held(x), held(delta), held(w), held(b), res_ref, y_ref,
                                             mean_ref, rstd_ref, 1e-5);
    kernels::cpu::residual_layernorm_backward(held(dy), held(dres), res_ref, held(w), mean_ref,
                                              rstd_ref, dx_ref, dw_ref, db_ref);
    // offset 3: a head of 1 f32 or 5 bf16 before each row's first boundary
    for (int64_t offset : {0, 3}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " offset " + std::to_string(offset));
      auto dev = [&](const Tensor& t) { return on_device_at(cast(t, dtype), offset); };
      auto out = [&](const Shape& shape) { return device_empty_at(shape, dtype, offset); };
      const Tensor wd = dev(w), res = out({rows, C}), y = out({rows, C}), dx = out({rows, C}),
                   dw = out({C}), db = out({C});
      const Tensor mean = device_empty({rows}), rstd = device_empty({rows});
      kernels::cuda::residual_layernorm_forward(dev(x), dev(delta), wd, dev(b), res, y, mean, rstd,
                                                1e-5);
      kernels::cuda::residual_layernorm_backward(dev(dy), dev(dres), res, wd, mean, rstd, dx, dw,
                                                 db);
      // bf16: the residual and every output rounded once more than on cpu, and the statistics
      // of a rounded residual
      const double rtol = dtype == DType::f32 ? 1e-5 : 4.0 / 256;
      EXPECT_TRUE(all_close(to_cpu(res), res_ref, rtol));
      EXPECT_TRUE(all_close(to_cpu(y), y_ref, rtol));
      EXPECT_TRUE(all_close(to_cpu(dx), dx_ref, rtol, 1e-5));
      EXPECT_TRUE(all_close(to_cpu(dw), dw_ref, rtol, 1e-5));
      EXPECT_TRUE(all_close(to_cpu(db), db_ref, rtol, 1e-5));
    }
  }
}

TEST(VectorPath, ClassifierAtAnOffsetMatchesCpu) {
  Generator gen(23);
  const int64_t rows = 6, cols = 40, vocab = 37;  // padded columns after the vocabulary
  const Tensor logits = randn({rows, cols}, gen);
  const Tensor targets = from_vector(std::vector<int32_t>{0, 5, 36, -100, 12, 7}, {rows});
  const Tensor losses_ref = Tensor::empty({rows}), valid_ref = Tensor::empty({1});
  const Tensor dlogits_ref = copy_of(logits);
  kernels::cpu::fused_classifier(dlogits_ref, targets, losses_ref, valid_ref, vocab, -100, true);
  for (int64_t offset : {0, 1}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    const Tensor l = on_device_at(logits, offset);
    const Tensor losses = device_empty({rows}), valid = device_empty({1});
    kernels::cuda::fused_classifier(l, on_device(targets), losses, valid, vocab, -100, true);
    EXPECT_TRUE(all_close(to_cpu(losses), losses_ref, 1e-5));
    EXPECT_TRUE(all_close(to_cpu(l), dlogits_ref, 1e-5, 1e-7));
  }
}

TEST(VectorPath, EmbeddingForwardAtAnOffsetMatchesCpu) {
  Generator gen(24);
  const int64_t vocab = 11, channels = 16;
  const Tensor table = randn({vocab, channels}, gen);
  const Tensor ids = from_vector(std::vector<int32_t>{3, 0, 10, 3, 7}, {5});
  const Tensor out_ref = Tensor::empty({5, channels});
  kernels::cpu::embedding_forward(ids, table, out_ref);
  for (int64_t offset : {0, 1}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    const Tensor out = device_empty_at({5, channels}, DType::f32, offset);
    kernels::cuda::embedding_forward(on_device(ids), on_device_at(table, offset), out);
    EXPECT_TRUE(all_close(to_cpu(out), out_ref, 0));
  }
}

TEST(VectorPath, AdamWAtAnOffsetMatchesCpu) {
  Generator gen(25);
  const int64_t n = 103;
  const Tensor p = randn({n}, gen), g = randn({n}, gen, 0, 0.1), m = randn({n}, gen, 0, 0.01);
  const Tensor v = full({n}, 1e-4);
  const kernels::AdamWHyper hyper{1e-2, 0.9, 0.95, 1e-8, 3};
  const Tensor p_ref = copy_of(p), m_ref = copy_of(m), v_ref = copy_of(v);
  const Tensor copy_ref = Tensor::empty({n}, DType::bf16);
  const std::vector<kernels::AdamWParam> on_cpu{{p_ref, g, m_ref, v_ref, 0.1, copy_ref}};
  kernels::cpu::adamw_step(on_cpu, hyper);
  for (int64_t offset : {0, 1}) {
    SCOPED_TRACE("offset " + std::to_string(offset));
    const Tensor pd = on_device_at(p, offset), md = on_device_at(m, offset),
                 vd = on_device_at(v, offset);
    // the bf16 copy at the other offset: its alignment is not p's
    const Tensor copy = device_empty_at({n}, DType::bf16, 1 - offset);
    const std::vector<kernels::AdamWParam> on_emu{{pd, on_device(g), md, vd, 0.1, copy}};
    kernels::cuda::adamw_step(on_emu, hyper);
    EXPECT_TRUE(all_close(to_cpu(pd), p_ref, 1e-6));
    EXPECT_TRUE(all_close(to_cpu(md), m_ref, 1e-6));
    EXPECT_TRUE(all_close(to_cpu(vd), v_ref, 1e-6));
    // the copy is the parameter the kernel wrote, rounded to nearest even (and cpu's within the
    // one bf16 step that a few f32 ulps of difference can cross)
    const std::vector<float> written = to_vector<float>(to_cpu(pd));
    const std::vector<bf16> bits = to_vector<bf16>(to_cpu(copy));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(bits[i].bits, bf16::from_float(written[i]).bits) << "at " << i;
    EXPECT_TRUE(all_close(to_cpu(copy), copy_ref, 1.0 / 128));
  }
}

// --- (b) embedding backward: a frequent token

// ids: token 7 `frequent` times, runs of exactly 32, 33 and 65 occurrences (one segment, one
// more, two more) of tokens 1, 2, 3, and single occurrences, shuffled by a fixed permutation.
Tensor frequent_token_ids(int64_t frequent) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < frequent; ++i) ids.push_back(7);
  for (auto [token, count] : {std::pair{1, 32}, {2, 33}, {3, 65}})
    for (int i = 0; i < count; ++i) ids.push_back(token);
  for (int32_t token = 8; token < 40; ++token) ids.push_back(token);
  for (size_t i = 0; i < ids.size(); ++i)  // a fixed shuffle: positions interleave
    std::swap(ids[i], ids[(i * 7919) % ids.size()]);
  return from_vector(ids, {static_cast<int64_t>(ids.size())});
}

TEST(CudaEmbedding, FrequentTokenIsSummedInSegmentsCloseToCpuAndDeterministic) {
  Generator gen(26);
  const int64_t vocab = 41;
  const Tensor ids = frequent_token_ids(2500);
  const int64_t n = ids.numel();
  for (int64_t channels : {40, 37}) {  // the vector path, and the scalar one
    SCOPED_TRACE("channels " + std::to_string(channels));
    const Tensor dout = randn({n, channels}, gen);
    const Tensor dtable_ref = Tensor::empty({vocab, channels});
    kernels::cpu::embedding_backward(ids, dout, dtable_ref);
    const Tensor ids_d = on_device(ids), dout_d = on_device(dout);
    const Tensor dtable = device_empty({vocab, channels});
    LaunchLog log;
    expect_deterministic({dtable},
                         [&] { kernels::cuda::embedding_backward(ids_d, dout_d, dtable); });
    EXPECT_NE(log.find("embedding_backward_combine"), nullptr);
    // 2500 terms of size ~1 summed in another order: f32 rounding of the sum's scale
    EXPECT_TRUE(all_close(to_cpu(dtable), dtable_ref, 1e-5, 1e-4));
    // a run of at most one segment (tokens 1 and 8..39) is summed in cpu's order: the same bits
    const std::vector<float> got = to_vector<float>(to_cpu(dtable)),
                             want = to_vector<float>(dtable_ref);
    for (int64_t token : {1, 8, 20, 39})
      for (int64_t c = 0; c < channels; ++c)
        EXPECT_EQ(got[token * channels + c], want[token * channels + c]) << token << ", " << c;
  }
}

TEST(CudaEmbedding, FrequentTokenInBf16IsCloseToCpu) {
  Generator gen(27);
  const int64_t vocab = 41, channels = 24;
  const Tensor ids = frequent_token_ids(1000);
  const Tensor dout = cast(cast(randn({ids.numel(), channels}, gen), DType::bf16), DType::f32);
  const Tensor dtable_ref = Tensor::empty({vocab, channels});
  kernels::cpu::embedding_backward(ids, dout, dtable_ref);
  const Tensor dtable = device_empty({vocab, channels}, DType::bf16);
  kernels::cuda::embedding_backward(on_device(ids), on_device(cast(dout, DType::bf16)), dtable);
  EXPECT_TRUE(all_close(to_cpu(dtable), dtable_ref, 1.0 / 256));  // one bf16 rounding
}

// --- (c) LayerNorm's parameter gradients over many rows

TEST(CudaLayerNorm, ParamGradsOfManyRowsUseATwoDimensionalGridAndMatchCpu) {
  Generator gen(28);
  const int64_t rows = 2000, C = 48;  // 63 chunks of 32 rows: 8 groups
  const Tensor x = randn({rows, C}, gen), w = randn({C}, gen, 1, 0.5), b = randn({C}, gen);
  const Tensor dy = randn({rows, C}, gen);
  const Tensor y_ref = empty_like(x), dx_ref = empty_like(x), dw_ref = empty_like(w),
               db_ref = empty_like(w);
  const Tensor mean_ref = Tensor::empty({rows}), rstd_ref = Tensor::empty({rows});
  kernels::cpu::layernorm_forward(x, w, b, y_ref, mean_ref, rstd_ref, 1e-5);
  kernels::cpu::layernorm_backward(dy, x, w, mean_ref, rstd_ref, dx_ref, dw_ref, db_ref);

  const Tensor xd = on_device(x), wd = on_device(w), dyd = on_device(dy);
  const Tensor mean = on_device(mean_ref), rstd = on_device(rstd_ref);
  const Tensor dx = device_empty({rows, C}), dw = device_empty({C}), db = device_empty({C});
  LaunchLog log;
  expect_deterministic({dx, dw, db}, [&] {
    kernels::cuda::layernorm_backward(dyd, xd, wd, mean, rstd, dx, dw, db);
  });
  const LaunchInfo* grads = log.find("layernorm_param_grads");
  ASSERT_NE(grads, nullptr);
  EXPECT_EQ(grads->grid.x, 1u);
  EXPECT_EQ(grads->grid.y, 8u);
  EXPECT_NE(log.find("layernorm_param_grads_combine"), nullptr);
  // 2000 terms of size ~1 in another order
  EXPECT_TRUE(all_close(to_cpu(dw), dw_ref, 1e-5, 1e-4));
  EXPECT_TRUE(all_close(to_cpu(db), db_ref, 1e-5, 1e-4));
  EXPECT_TRUE(all_close(to_cpu(dx), dx_ref, 1e-5, 1e-5));
}

// --- (f) saturating conversion to i32

TEST(SaturatingCast, F32ToI32SaturatesAndNanIsZeroOnCpuAndEmu) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in{nan,  inf,   -inf,          3e9f,          -3e9f,
                              2.7f, -2.7f, 2147483520.0f, -2147483648.0f};
  const std::vector<int32_t> want{0, INT32_MAX, INT32_MIN,  INT32_MAX, INT32_MIN,
                                  2, -2,        2147483520, INT32_MIN};
  const Tensor src = from_vector(in, {static_cast<int64_t>(in.size())});
  const Tensor on_cpu = Tensor::empty(src.shape(), DType::i32);
  kernels::cpu::cast(src, on_cpu);
  EXPECT_EQ(to_vector<int32_t>(on_cpu), want);
  const Tensor on_emu = device_empty(src.shape(), DType::i32);
  kernels::cuda::cast(on_device(src), on_emu);
  EXPECT_EQ(to_vector<int32_t>(to_cpu(on_emu)), want);
  // fill converts its value the same way
  for (auto [value, expected] : {std::pair{static_cast<double>(nan), 0},
                                 {1e10, INT32_MAX},
                                 {-1e10, INT32_MIN},
                                 {-7.9, -7}}) {
    const Tensor c = Tensor::empty({3}, DType::i32), e = device_empty({3}, DType::i32);
    kernels::cpu::fill(c, value);
    kernels::cuda::fill(e, value);
    EXPECT_EQ(to_vector<int32_t>(c), std::vector<int32_t>(3, expected)) << value;
    EXPECT_EQ(to_vector<int32_t>(to_cpu(e)), std::vector<int32_t>(3, expected)) << value;
  }
}

}  // namespace
}  // namespace glass
