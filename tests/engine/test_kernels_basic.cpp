// The basic `cpu` kernels (copy, elementwise, reductions, GEMM, embedding, optimizer steps,
// dropout) called through the dispatch table, each against a naive loop in double written here.
// Also: Philox known answers, results bit-identical across thread counts, and the kernels' errors.
// This suite links the kernels only (no autograd): tensors are built from host vectors.
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "engine/rng.h"
#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;
const kernels::Backend& cpu = kernels::backend(kCPU);

// n standard normals (times scale), from a Philox stream of its own.
std::vector<double> randoms(size_t n, uint64_t seed, double scale = 1) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * philox_normal(seed, 0, i);
  return v;
}

template <class T>
Tensor make(const std::vector<double>& v, const Shape& shape) {
  std::vector<T> typed(v.begin(), v.end());
  return Tensor::from_host(typed.data(), shape, dtype_of<T>());
}

// A contiguous tensor's elements as doubles.
std::vector<double> read(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::f64) {
    t.copy_to_host(out.data());
  } else {
    std::vector<float> f(out.size());
    t.copy_to_host(f.data());
    out.assign(f.begin(), f.end());
  }
  return out;
}

// The raw bits of a contiguous f32 tensor, for bit-exact comparisons.
std::vector<float> bits(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  t.copy_to_host(v.data());
  return v;
}

double naive_gelu(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// ---------------------------------------------------------------------------------------------
// Philox

TEST(CpuKernels, PhiloxKnownAnswers) {
  // Random123's known-answer vectors for Philox4x32-10.
  struct Case {
    uint64_t key, ctr_lo, ctr_hi;
    uint32_t expect[4];
  };
  const Case cases[] = {
      {0, 0, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {~0ull, ~0ull, ~0ull, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {0x299f31d0a4093822ull,
       0x85a308d3243f6a88ull,
       0x0370734413198a2eull,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& c : cases) {
    const Philox4 r = philox4x32_10(c.key, c.ctr_lo, c.ctr_hi);
    for (int l = 0; l < 4; ++l) EXPECT_EQ(r.v[l], c.expect[l]) << "lane " << l;
  }
}

TEST(CpuKernels, PhiloxStreamsArePureFunctions) {
  // Word i of (seed, offset) is lane i%4 of block offset + i/4: the same numbers however the
  // range is cut, and a reserved range never overlaps the next.
  EXPECT_EQ(philox_word(7, 3, 9), philox4x32_10(7, 3 + 2, 0).v[1]);
  // Word 9 of offset 3 is lane 1 of block 3 + 2, as a uniform: the top 24 bits over 2^24.
  EXPECT_EQ(philox_uniform(7, 3, 9),
            static_cast<float>(philox4x32_10(7, 3 + 2, 0).v[1] >> 8) * 0x1p-24f);
  EXPECT_EQ(philox_uniform(7, 3, 8), philox_uniform(7, 4, 4));
  EXPECT_NE(philox_word(7, 3, 0), philox_word(8, 3, 0));
  Generator gen(5);
  const uint64_t a = gen.reserve(10), b = gen.reserve(1);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 3u);  // 10 words take 3 blocks of 4
  for (uint64_t i = 0; i < 1000; ++i) {
    const float u = philox_uniform(11, 0, i);
    ASSERT_TRUE(u >= 0.0f && u < 1.0f);
  }
}

// ---------------------------------------------------------------------------------------------
// Copy

// A strided view into a storage of `storage` elements.
struct View {
  Shape shape, strides;
  int64_t offset, storage;
};

// Element offset of the idx-th element (row-major over v.shape) of a view.
int64_t element_offset(const View& v, int64_t idx) {
  int64_t off = v.offset;
  for (int d = static_cast<int>(v.shape.size()) - 1; d >= 0; --d) {
    off += idx % v.shape[d] * v.strides[d];
    idx /= v.shape[d];
  }
  return off;
}

// Copies src into dst (both views, of one shape) with elements of type U tagged by position, and
// expects every destination element to hold its source element and the rest of the destination
// storage to be untouched.
template <class U>
::testing::AssertionResult copies_like_index_arithmetic(DType dtype, const View& src,
                                                        const View& dst) {
  std::vector<U> s(static_cast<size_t>(src.storage)), d(static_cast<size_t>(dst.storage), U(0));
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<U>(i % 60000 + 1);  // never 0
  const Tensor from = Tensor::from_host(s.data(), {src.storage}, dtype);
  const Tensor to = Tensor::from_host(d.data(), {dst.storage}, dtype);
  cpu.copy(from.as_strided(src.shape, src.strides, src.offset),
           to.as_strided(dst.shape, dst.strides, dst.offset));
  std::vector<U> expected = d, got(d.size());
  for (int64_t i = 0; i < shape_numel(src.shape); ++i)
    expected[element_offset(dst, i)] = s[element_offset(src, i)];
  to.copy_to_host(got.data());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != expected[i])
      return ::testing::AssertionFailure()
             << dtype_name(dtype) << " " << shape_str(src.shape) << ": storage element " << i
             << " is " << got[i] << ", expected " << expected[i];
  return ::testing::AssertionSuccess();
}

// Tensor::copy_from_host overwrites a tensor's own memory (what a CUDA graph reads is uploaded
// into place), including a contiguous view at an offset, and refuses a non-contiguous one.
TEST(CpuKernels, CopyFromHostOverwritesInPlace) {
  const Tensor t = make<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const float* before = t.data<float>();
  const std::vector<float> fresh{10, 20, 30, 40, 50, 60};
  t.copy_from_host(fresh.data());
  EXPECT_EQ(t.data<float>(), before);
  EXPECT_EQ(bits(t), fresh);
  const std::vector<float> row{7, 8, 9};
  t.as_strided({3}, {1}, 3).copy_from_host(row.data());  // row 1
  EXPECT_EQ(bits(t), (std::vector<float>{10, 20, 30, 7, 8, 9}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             t.as_strided({3, 2}, {1, 3}, 0).copy_from_host(row.data());
                           }),
                           {"copy_from_host", "not contiguous", "[3, 2]"}));
}

TEST(CpuKernels, CopyMatchesIndexArithmeticForAnyStrides) {
  // A contiguous view of `shape` in a storage of its own.
  auto dense = [](const Shape& shape) {
    Shape strides(shape.size());
    int64_t n = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) strides[d] = n, n *= shape[d];
    return View{shape, strides, 0, n};
  };
  // `base` (contiguous) with dims permuted: a non-contiguous view of the same storage.
  auto permuted = [&](const Shape& base, const std::vector<int>& dims) {
    const View b = dense(base);
    View v{{}, {}, 0, b.storage};
    for (int d : dims) v.shape.push_back(base[d]), v.strides.push_back(b.strides[d]);
    return v;
  };
  struct Case {
    const char* name;
    View src, dst;
  };
  const Case cases[] = {
      // [B, T, H, D] <-> [B, H, T, D]: rows of D contiguous on both sides
      {"split heads", permuted({2, 5, 3, 4}, {0, 2, 1, 3}), dense({2, 3, 5, 4})},
      {"merge heads", permuted({2, 3, 5, 4}, {0, 2, 1, 3}), dense({2, 5, 3, 4})},
      // transposes of the last two dims, with partial tiles, one and more outer dims
      {"2-D transpose", permuted({37, 45}, {1, 0}), dense({45, 37})},
      {"3-D transpose", permuted({3, 19, 23}, {0, 2, 1}), dense({3, 23, 19})},
      {"5-D permute", permuted({2, 3, 4, 5, 6}, {2, 0, 1, 4, 3}), dense({4, 2, 3, 6, 5})},
      // big enough to thread: rows of 64 over four outer dims, and a threaded transpose
      {"threaded rows", permuted({4, 8, 16, 4, 64}, {1, 0, 3, 2, 4}), dense({8, 4, 4, 16, 64})},
      {"threaded transpose", permuted({3, 130, 97}, {0, 2, 1}), dense({3, 97, 130})},
      // broadcast sources (stride 0), along the rows and along the inner run
      {"broadcast rows", View{{5, 7}, {0, 1}, 0, 7}, dense({5, 7})},
      {"broadcast inner", View{{7, 5}, {1, 0}, 0, 7}, dense({7, 5})},
      // a strided destination: columns [2, 7) of a [4, 9] matrix, as slice backward writes
      {"into a slice", dense({4, 5}), View{{4, 5}, {9, 1}, 2, 36}},
      // runs longer than one piece: contiguous rows with an offset, and a stride-2 run
      {"long rows", View{{2, 30000}, {30001, 1}, 1, 60002}, dense({2, 30000})},
      {"long strided run", View{{3, 20001}, {40002, 2}, 0, 120006}, dense({3, 20001})},
      // one element, and none
      {"0-d", View{{}, {}, 3, 5}, View{{}, {}, 1, 2}},
      {"empty", View{{3, 0}, {1, 3}, 0, 1}, dense({3, 0})},
  };
  for (int threads : {1, 3})
    with_threads(threads, [&] {
      for (const Case& c : cases) {
        EXPECT_TRUE(copies_like_index_arithmetic<uint16_t>(DType::bf16, c.src, c.dst)) << c.name;
        EXPECT_TRUE(copies_like_index_arithmetic<int32_t>(DType::i32, c.src, c.dst)) << c.name;
        EXPECT_TRUE(copies_like_index_arithmetic<uint64_t>(DType::f64, c.src, c.dst)) << c.name;
      }
      return 0;
    });
}

// ---------------------------------------------------------------------------------------------
// Elementwise

TEST(CpuKernels, BinaryContiguousMatchesNaive) {
  const std::vector<double> av = randoms(1037, 1), bv = randoms(1037, 2);
  const Tensor a = make<float>(av, {1037}), b = make<float>(bv, {1037});
  const kernels::BinaryOp ops[] = {kernels::BinaryOp::add, kernels::BinaryOp::sub,
                                   kernels::BinaryOp::mul, kernels::BinaryOp::div};
  for (auto op : ops) {
    std::vector<double> ref(av.size());
    for (size_t i = 0; i < av.size(); ++i) {
      const double x = static_cast<float>(av[i]), y = static_cast<float>(bv[i]);
      ref[i] = op == kernels::BinaryOp::add   ? x + y
               : op == kernels::BinaryOp::sub ? x - y
               : op == kernels::BinaryOp::mul ? x * y
                                              : x / y;
    }
    Tensor out = Tensor::empty({1037});
    cpu.binary(op, a, b, out);
    EXPECT_TRUE(all_close(read(out), ref, 1e-6)) << kernels::binary_op_name(op);
  }
}

TEST(CpuKernels, BinaryBroadcastAndTransposedStrides) {
  // out [7, 13] = a op b for: b a row broadcast down (strides [0, 1]), b a column broadcast
  // across (strides [1, 0]), a a transposed view of a [13, 7] matrix (strides [1, 7]).
  const std::vector<double> av = randoms(7 * 13, 3), rowv = randoms(13, 4), colv = randoms(7, 5);
  const Tensor a = make<double>(av, {7, 13});
  const Tensor row = make<double>(rowv, {13}).as_strided({7, 13}, {0, 1}, 0);
  const Tensor col = make<double>(colv, {7}).as_strided({7, 13}, {1, 0}, 0);
  const Tensor at = make<double>(av, {13, 7}).as_strided({7, 13}, {1, 7}, 0);
  Tensor out = Tensor::empty({7, 13}, DType::f64);
  std::vector<double> ref(7 * 13);

  cpu.binary(kernels::BinaryOp::sub, a, row, out);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 13; ++j) ref[i * 13 + j] = av[i * 13 + j] - rowv[j];
  EXPECT_TRUE(all_close(read(out), ref, 1e-15));

  cpu.binary(kernels::BinaryOp::div, col, a, out);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 13; ++j) ref[i * 13 + j] = colv[i] / av[i * 13 + j];
  EXPECT_TRUE(all_close(read(out), ref, 1e-15));

  cpu.binary(kernels::BinaryOp::mul, at, col, out);
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 13; ++j) ref[i * 13 + j] = av[j * 7 + i] * colv[i];
  EXPECT_TRUE(all_close(read(out), ref, 1e-15));
}

TEST(CpuKernels, BinaryOutputMayAliasAnInput) {
  // Large enough to run threaded; the output is the first operand's own memory.
  const size_t n = 3 * 33333;
  const std::vector<double> av = randoms(n, 6), bv = randoms(33333, 7);
  Tensor a = make<float>(av, {3, 33333});
  const Tensor b = make<float>(bv, {33333}).as_strided({3, 33333}, {0, 1}, 0);
  cpu.binary(kernels::BinaryOp::add, a, b, a);
  std::vector<double> ref(n);
  for (size_t i = 0; i < n; ++i)
    ref[i] = static_cast<float>(av[i]) + static_cast<float>(bv[i % 33333]);
  EXPECT_TRUE(all_close(read(a), ref, 1e-6));
}

TEST(CpuKernels, AffinePowAndGeluMatchNaive) {
  const std::vector<double> xv = randoms(1001, 8, 2);
  const Tensor x = make<float>(xv, {7, 11, 13});
  Tensor y = Tensor::empty({7, 11, 13});
  std::vector<double> ref(xv.size());

  cpu.affine(x, y, -1.5, 0.25);
  for (size_t i = 0; i < xv.size(); ++i) ref[i] = static_cast<float>(xv[i]) * -1.5 + 0.25;
  EXPECT_TRUE(all_close(read(y), ref, 1e-6));

  for (double p : {2.0, 3.0, -1.0}) {
    cpu.pow_scalar(x, y, p);
    for (size_t i = 0; i < xv.size(); ++i) ref[i] = std::pow(static_cast<float>(xv[i]), p);
    // 1/x explodes near 0: judge each element by its own size there.
    const std::vector<double> got = read(y);
    for (size_t i = 0; i < xv.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 1e-6 * (1 + std::abs(ref[i]))) << "p " << p << " at " << i;
  }

  cpu.gelu_forward(x, y);
  for (size_t i = 0; i < xv.size(); ++i) ref[i] = naive_gelu(static_cast<float>(xv[i]));
  EXPECT_TRUE(all_close(read(y), ref, 1e-6));

  // gelu_backward against a central difference of the double-precision forward.
  const std::vector<double> dyv = randoms(1001, 9);
  const Tensor dy = make<float>(dyv, {7, 11, 13});
  cpu.gelu_backward(x, dy, y);
  for (size_t i = 0; i < xv.size(); ++i) {
    const double v = static_cast<float>(xv[i]), h = 1e-5;
    ref[i] = static_cast<float>(dyv[i]) * (naive_gelu(v + h) - naive_gelu(v - h)) / (2 * h);
  }
  EXPECT_TRUE(all_close(read(y), ref, 1e-5));
}

TEST(CpuKernels, DropoutMatchesPhiloxMaskAndIsDeterministic) {
  const int64_t n = 100003;
  const double p = 0.3;
  const uint64_t seed = 42, offset = 17;
  const std::vector<double> xv = randoms(n, 10);
  const Tensor x = make<float>(xv, {n});
  auto run = [&](int threads, uint64_t off) {
    return with_threads(threads, [&] {
      Tensor y = Tensor::empty({n});
      cpu.dropout_forward(x, y, p, {seed, off});
      return bits(y);
    });
  };
  const std::vector<float> y1 = run(1, offset), y3 = run(3, offset);
  EXPECT_EQ(y1, y3);                  // bit-identical whatever the thread count
  EXPECT_NE(y1, run(1, offset + 1));  // another offset, another mask

  // Each element: kept (scaled by 1/(1-p)) exactly when philox_uniform >= p.
  int64_t kept = 0;
  const float scale = static_cast<float>(1 / (1 - p));
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = philox_uniform(seed, offset, i) >= p;
    kept += keep;
    ASSERT_EQ(y1[i], keep ? static_cast<float>(xv[i]) * scale : 0.0f) << "element " << i;
  }
  // The keep rate is 1 - p within a few standard deviations (sd ~ 0.0015 here).
  EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.01);

  // Backward applies the same mask to dy.
  Tensor dx = Tensor::empty({n});
  cpu.dropout_backward(x, dx, p, {seed, offset});
  EXPECT_EQ(bits(dx), y1);

  // p = 1 drops everything; p = 0 keeps everything unscaled.
  Tensor y = Tensor::empty({n});
  cpu.dropout_forward(x, y, 1.0, {seed, offset});
  for (float v : bits(y)) ASSERT_EQ(v, 0.0f);
  cpu.dropout_forward(x, y, 0.0, {seed, offset});
  EXPECT_EQ(bits(y), bits(x));
}

// ---------------------------------------------------------------------------------------------
// Reductions

// x [outer, n, inner] summed over n, in double.
std::vector<double> naive_sum(const std::vector<double>& x, int64_t outer, int64_t n,
                              int64_t inner) {
  std::vector<double> out(static_cast<size_t>(outer * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < inner; ++i) out[o * inner + i] += x[(o * n + r) * inner + i];
  return out;
}

TEST(CpuKernels, SumDimMatchesNaiveForEveryLayout) {
  // Small odd shapes over every dim, then the two large cases: long rows (inner == 1, many
  // chunks) and the bias gradient (outer == 1, many rows), and a row wider than a column block.
  struct Case {
    Shape shape;
    int dim;
  };
  const Case cases[] = {{{5, 7, 3}, 0},  {{5, 7, 3}, 1}, {{5, 7, 3}, 2},     {{3, 140001}, 1},
                        {{20011, 7}, 0}, {{5, 2053}, 0}, {{2, 33, 1500}, 1}, {{13}, 0}};
  for (const Case& c : cases) {
    const int64_t n = c.shape[c.dim];
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < c.dim; ++d) outer *= c.shape[d];
    for (size_t d = c.dim + 1; d < c.shape.size(); ++d) inner *= c.shape[d];
    const std::vector<double> xv = randoms(static_cast<size_t>(shape_numel(c.shape)), 11);
    Shape out_shape = c.shape;
    out_shape.erase(out_shape.begin() + c.dim);
    const std::vector<double> ref = naive_sum(xv, outer, n, inner);
    // f64 checks the indexing tightly, f32 the accumulation.
    Tensor out64 = Tensor::empty(out_shape, DType::f64);
    cpu.sum_dim(make<double>(xv, c.shape), out64, c.dim);
    EXPECT_TRUE(all_close(read(out64), ref, 1e-12)) << shape_str(c.shape) << " dim " << c.dim;
    std::vector<double> xf(xv.begin(), xv.end());
    for (double& v : xf) v = static_cast<float>(v);
    Tensor out32 = Tensor::empty(out_shape);
    cpu.sum_dim(make<float>(xv, c.shape), out32, c.dim);
    EXPECT_TRUE(all_close(read(out32), naive_sum(xf, outer, n, inner), 1e-6))
        << shape_str(c.shape) << " dim " << c.dim;
  }
  // Summing over an empty dimension gives zeros.
  Tensor zeros_out = Tensor::empty({4, 3});
  cpu.sum_dim(Tensor::empty({4, 0, 3}), zeros_out, 1);
  EXPECT_EQ(read(zeros_out), std::vector<double>(12, 0.0));
}

TEST(CpuKernels, ReductionsAreBitIdenticalAcrossThreadCounts) {
  const std::vector<double> xv = randoms(7 * 10001, 12, 3);
  const Tensor rows = make<float>(xv, {7, 10001}), cols = make<float>(xv, {10001, 7});
  auto reduce = [&](int threads) {
    return with_threads(threads, [&] {
      Tensor row_sums = Tensor::empty({7}), col_sums = Tensor::empty({7}), sq = Tensor::empty({1});
      cpu.sum_dim(rows, row_sums, 1);
      cpu.sum_dim(cols, col_sums, 0);
      cpu.sum_squares(std::span(&rows, 1), sq);
      std::vector<float> all = bits(row_sums);
      for (float v : bits(col_sums)) all.push_back(v);
      all.push_back(bits(sq)[0]);
      return all;
    });
  };
  EXPECT_EQ(reduce(1), reduce(2));
  EXPECT_EQ(reduce(1), reduce(3));
}

TEST(CpuKernels, SumSquaresOfManyTensorsMatchesNaive) {
  // Sizes that leave partial chunks, an empty tensor, and an f64 tensor among the f32 ones.
  std::vector<Tensor> xs;
  double ref = 0;
  uint64_t seed = 5;
  for (int64_t n : {1, 13, 150001, 0, 70000}) {
    const std::vector<double> xv = randoms(static_cast<size_t>(n), 13, seed++);
    for (double v : xv) ref += static_cast<double>(static_cast<float>(v)) * static_cast<float>(v);
    xs.push_back(make<float>(xv, {n}));
  }
  const std::vector<double> wide = randoms(37, 13, seed);
  for (double v : wide) ref += v * v;
  xs.push_back(make<double>(wide, {37}));
  Tensor out = Tensor::empty({1}, DType::f64);
  cpu.sum_squares(xs, out);
  EXPECT_NEAR(read(out)[0], ref, 1e-12 * ref);
  cpu.sum_squares(std::span(xs.data(), 1), out);
  EXPECT_NEAR(read(out)[0], read(xs[0])[0] * read(xs[0])[0], 1e-12);
  cpu.sum_squares({}, out);
  EXPECT_EQ(read(out)[0], 0.0);
}

// ---------------------------------------------------------------------------------------------
// GEMM

// C[i] = alpha op(A[i]) op(B[i]) + bias + beta C[i], naive, for the same arguments as GemmArgs.
std::vector<double> naive_gemm(const kernels::GemmArgs& g, const std::vector<double>& a,
                               const std::vector<double>& b, const std::vector<double>& c0,
                               const std::vector<double>& bias) {
  std::vector<double> c = c0;
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const double av =
              g.trans_a ? a[bi * g.stride_a + p * g.lda + i] : a[bi * g.stride_a + i * g.lda + p];
          const double bv =
              g.trans_b ? b[bi * g.stride_b + j * g.ldb + p] : b[bi * g.stride_b + p * g.ldb + j];
          s += av * bv;
        }
        double& out = c[bi * g.stride_c + i * g.ldc + j];
        out = g.alpha * s + (bias.empty() ? 0 : bias[j]) + (g.beta == 0 ? 0 : g.beta * out);
      }
  return c;
}

TEST(CpuKernels, GemmMatchesNaiveForFlagsPaddingBatchAndBias) {
  const int64_t m = 7, n = 5, k = 13, batch = 3;
  for (int flags = 0; flags < 8; ++flags) {
    kernels::GemmArgs g;
    g.trans_a = flags & 1;
    g.trans_b = flags & 2;
    const bool with_bias = flags & 4;
    g.m = m, g.n = n, g.k = k, g.batch = batch;
    // Leading dimensions padded past the row length; B shared by the batch in half the cases.
    g.lda = (g.trans_a ? m : k) + 2;
    g.ldb = (g.trans_b ? k : n) + 1;
    g.ldc = n + 3;
    g.stride_a = (g.trans_a ? k : m) * g.lda;
    g.stride_b = with_bias ? 0 : (g.trans_b ? n : k) * g.ldb;
    g.stride_c = m * g.ldc;
    g.alpha = 0.5;
    g.beta = with_bias ? 0 : 0.25;
    const std::vector<double> av = randoms(batch * g.stride_a, 20 + flags),
                              bv = randoms(batch * (g.trans_b ? n : k) * g.ldb, 30 + flags),
                              biasv = with_bias ? randoms(n, 40) : std::vector<double>();
    // With beta = 0 the old C must not be read: fill it with NaN.
    std::vector<double> cv = randoms(batch * g.stride_c, 50 + flags);
    if (g.beta == 0) cv.assign(cv.size(), std::numeric_limits<double>::quiet_NaN());
    const std::vector<double> ref = naive_gemm(g, av, bv, cv, biasv);
    g.a = make<double>(av, {static_cast<int64_t>(av.size())});
    g.b = make<double>(bv, {static_cast<int64_t>(bv.size())});
    g.c = make<double>(cv, {static_cast<int64_t>(cv.size())});
    if (with_bias) g.bias = make<double>(biasv, {n});
    cpu.gemm(g);
    // Compare the written entries (padding columns keep their old values either way).
    const std::vector<double> got = read(g.c);
    for (int64_t bi = 0; bi < batch; ++bi)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const size_t at = bi * g.stride_c + i * g.ldc + j;
          ASSERT_NEAR(got[at], ref[at], 1e-12)
              << "flags " << flags << " at " << bi << "," << i << "," << j;
        }
  }
}

TEST(CpuKernels, GemmF32MatchesNaive) {
  kernels::GemmArgs g;
  g.m = 33, g.n = 17, g.k = 65, g.lda = 65, g.ldb = 17, g.ldc = 17;
  const std::vector<double> av = randoms(33 * 65, 60), bv = randoms(65 * 17, 61);
  g.a = make<float>(av, {33, 65});
  g.b = make<float>(bv, {65, 17});
  g.c = Tensor::empty({33, 17});
  cpu.gemm(g);
  std::vector<double> af(av.begin(), av.end()), bf(bv.begin(), bv.end());
  for (double& v : af) v = static_cast<float>(v);
  for (double& v : bf) v = static_cast<float>(v);
  EXPECT_TRUE(all_close(read(g.c), naive_gemm(g, af, bf, std::vector<double>(33 * 17), {}), 1e-5));
}

TEST(CpuKernels, GemmRejectsBadLeadingDimensions) {
  kernels::GemmArgs g;
  g.m = 4, g.n = 3, g.k = 5, g.lda = 5, g.ldb = 3, g.ldc = 3;
  g.a = Tensor::empty({4, 5});
  g.b = Tensor::empty({5, 3});
  g.c = Tensor::empty({4, 3});
  auto err = [&](kernels::GemmArgs bad) { return error_of([&] { cpu.gemm(bad); }); };
  kernels::GemmArgs bad = g;
  bad.lda = 4;  // shorter than k
  EXPECT_TRUE(contains_all(err(bad), {"lda = 4"}));
  bad = g;
  bad.trans_b = true;  // B read as 3 x 5 with ldb 3 < 5
  EXPECT_TRUE(contains_all(err(bad), {"ldb"}));
  bad = g;
  bad.ldc = 4;  // C's last row would end past its 12 elements
  EXPECT_TRUE(contains_all(err(bad), {"beyond its storage"}));
  bad = g;
  bad.batch = 2, bad.stride_a = 20;  // a second A that does not exist
  EXPECT_TRUE(contains_all(err(bad), {"A ("}));
  bad = g;
  bad.b = Tensor::empty({5, 3}, DType::f64);
  EXPECT_TRUE(contains_all(err(bad), {"one dtype"}));
}

// ---------------------------------------------------------------------------------------------
// Embedding

TEST(CpuKernels, EmbeddingGatherAndDeterministicScatterAdd) {
  const int64_t V = 11, C = 37, N = 2001;
  std::vector<int32_t> ids(N);
  for (int64_t i = 0; i < N; ++i) ids[i] = static_cast<int32_t>(philox_word(70, 0, i) % (V - 2));
  const Tensor idt = Tensor::from_host(ids.data(), {N}, DType::i32);
  const std::vector<double> tv = randoms(V * C, 71), gv = randoms(N * C, 72);
  Tensor out = Tensor::empty({N, C});
  cpu.embedding_forward(idt, make<float>(tv, {V, C}), out);
  std::vector<double> ref(N * C);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) ref[i * C + c] = static_cast<float>(tv[ids[i] * C + c]);
  EXPECT_EQ(read(out), ref);

  // Rows V-2 and V-1 are never used: they must come out 0, not stale memory.
  const Tensor dout = make<float>(gv, {N, C});
  auto backward = [&](int threads) {
    return with_threads(threads, [&] {
      Tensor dtable = make<float>(std::vector<double>(V * C, 123.0), {V, C});
      cpu.embedding_backward(idt, dout, dtable);
      return bits(dtable);
    });
  };
  const std::vector<float> d1 = backward(1);
  EXPECT_EQ(d1, backward(3));
  std::vector<double> dref(V * C, 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 0; c < C; ++c) dref[ids[i] * C + c] += static_cast<float>(gv[i * C + c]);
  EXPECT_TRUE(all_close(std::vector<double>(d1.begin(), d1.end()), dref, 1e-6));
}

TEST(CpuKernels, EmbeddingNamesTheBadId) {
  const std::vector<int32_t> ids = {0, 2, 1, 7, 3};
  const Tensor idt = Tensor::from_host(ids.data(), {5}, DType::i32);
  Tensor out = Tensor::empty({5, 4});
  const std::string e = error_of([&] { cpu.embedding_forward(idt, Tensor::empty({5, 4}), out); });
  EXPECT_TRUE(contains_all(e, {"id 7 at position 3"}));
  const std::string eb = error_of([&] { cpu.embedding_backward(idt, out, Tensor::empty({5, 4})); });
  EXPECT_TRUE(contains_all(eb, {"id 7 at position 3"}));
}

// ---------------------------------------------------------------------------------------------
// Optimizers

TEST(CpuKernels, AdamWOfManyParametersMatchesReferenceFormula) {
  // Two parameters in one step, each with its own weight decay (a matrix and a bias).
  const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8;
  const std::vector<int64_t> sizes = {1037, 13};
  const std::vector<double> decays = {0.1, 0.0};
  std::vector<std::vector<double>> p, m, v;
  std::vector<kernels::AdamWParam> params;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const int64_t n = sizes[k];
    p.push_back(randoms(n, 80 + k));
    for (double& x : p[k]) x = static_cast<float>(x);
    m.emplace_back(n, 0.0);
    v.emplace_back(n, 0.0);
    params.push_back({make<float>(p[k], {n}), Tensor(), make<float>(m[k], {n}),
                      make<float>(v[k], {n}), decays[k]});
  }
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<std::vector<double>> g;
    for (size_t k = 0; k < sizes.size(); ++k) {
      g.push_back(randoms(sizes[k], 90 + 10 * step + k));
      params[k].grad = make<float>(g[k], {sizes[k]});
    }
    cpu.adamw_step(params, {lr, b1, b2, eps, step});
    // Reference, in double, as PyTorch documents AdamW.
    for (size_t k = 0; k < sizes.size(); ++k)
      for (int64_t i = 0; i < sizes[k]; ++i) {
        const double gi = static_cast<float>(g[k][i]);
        p[k][i] -= lr * decays[k] * p[k][i];
        m[k][i] = b1 * m[k][i] + (1 - b1) * gi;
        v[k][i] = b2 * v[k][i] + (1 - b2) * gi * gi;
        const double m_hat = m[k][i] / (1 - std::pow(b1, step));
        const double v_hat = v[k][i] / (1 - std::pow(b2, step));
        p[k][i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
      }
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    EXPECT_TRUE(all_close(read(params[k].param), p[k], 1e-6)) << k;
    EXPECT_TRUE(all_close(read(params[k].m), m[k], 1e-6)) << k;
    EXPECT_TRUE(all_close(read(params[k].v), v[k], 1e-6)) << k;
  }
}

TEST(CpuKernels, SgdMatchesReferenceFormula) {
  const int64_t n = 101;
  const double lr = 0.1, momentum = 0.9, wd = 0.01;
  std::vector<double> p = randoms(n, 100), buf(n, 0.0);
  for (double& x : p) x = static_cast<float>(x);
  std::vector<double> p_plain = p;
  // The buffer starts as NaN: the first step must not read it.
  const Tensor param = make<float>(p, {n}), plain = make<float>(p, {n});
  const Tensor buft = make<float>(std::vector<double>(n, std::nan("")), {n});
  for (int step = 1; step <= 3; ++step) {
    const std::vector<double> g = randoms(n, 110 + step);
    const Tensor gt = make<float>(g, {n});
    cpu.sgd_step(param, gt, buft, lr, momentum, wd, step == 1);
    cpu.sgd_step(plain, gt, Tensor(), lr, 0, wd, step == 1);  // no momentum, no buffer
    for (int64_t i = 0; i < n; ++i) {
      const double gi = static_cast<float>(g[i]) + wd * p[i];
      buf[i] = step == 1 ? gi : momentum * buf[i] + gi;
      p[i] -= lr * buf[i];
      p_plain[i] -= lr * (static_cast<float>(g[i]) + wd * p_plain[i]);
    }
  }
  EXPECT_TRUE(all_close(read(param), p, 1e-6));
  EXPECT_TRUE(all_close(read(buft), buf, 1e-6));
  EXPECT_TRUE(all_close(read(plain), p_plain, 1e-6));
}

TEST(CpuKernels, ErrorsNameTheKernelAndTensors) {
  const Tensor a = Tensor::empty({2, 3}), b = Tensor::empty({3, 2});
  Tensor out = Tensor::empty({2, 3});
  std::string e = error_of([&] { cpu.binary(kernels::BinaryOp::add, a, b, out); });
  EXPECT_TRUE(contains_all(e, {"binary add"}));
  EXPECT_TRUE(contains_all(e, {"f32[3, 2]"}));
  const Tensor ints = Tensor::empty({2, 3}, DType::i32);
  Tensor int_out = Tensor::empty({2, 3}, DType::i32);
  e = error_of([&] { cpu.binary(kernels::BinaryOp::mul, ints, ints, int_out); });
  EXPECT_TRUE(contains_all(e, {"i32 is not supported"}));
  e = error_of([&] { cpu.gelu_forward(a, b); });
  EXPECT_TRUE(contains_all(e, {"gelu_forward"}));
  e = error_of([&] { cpu.dropout_forward(a, out, 1.5, {}); });
  EXPECT_TRUE(contains_all(e, {"probability 1.5"}));
  Tensor bad_out = Tensor::empty({2});
  e = error_of([&] { cpu.sum_dim(a, bad_out, 0); });
  EXPECT_TRUE(contains_all(e, {"sum_dim"}));
  // A bad parameter anywhere in the list is found before any parameter changes.
  const std::vector<kernels::AdamWParam> adamw = {
      {out, out, Tensor::empty({2, 3}), Tensor::empty({2, 3}), 0.1},
      {a, Tensor::empty({3}), a, a, 0.0}};
  const std::vector<double> before = read(out);
  e = error_of([&] { cpu.adamw_step(adamw, {1e-3, 0.9, 0.999, 1e-8, 1}); });
  EXPECT_TRUE(contains_all(e, {"adamw_step", "f32[3]", "f32[2, 3]"}));
  EXPECT_EQ(read(out), before);
  e = error_of([&] { cpu.adamw_step(std::span(adamw.data(), 1), {1e-3, 0.9, 0.999, 1e-8, 0}); });
  EXPECT_TRUE(contains_all(e, {"adamw_step", "step 0"}));
  e = error_of([&] { cpu.sum_squares(std::span(&ints, 1), bad_out); });
  EXPECT_TRUE(contains_all(e, {"sum_squares", "f32[2]"}));
}

}  // namespace
}  // namespace glass
