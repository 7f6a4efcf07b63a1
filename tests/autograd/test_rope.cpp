// rotary_embedding: forward against a naive per-element rotation computed here in double (f64 to
// 1e-12, f32 to f32 rounding), and in f32 at large positions against angles formed in f32 the way
// Hugging Face forms them; v passes through and the input is left as it was; gradcheck in f64
// (grouped-query heads, a start position, a non-contiguous input); bit-identical for any thread
// count; the cpu kernels' cached cos/sin tables against the naive rotation over calls differing
// in one argument at a time; the errors naming each bad argument.
#include <cmath>
#include <string>

#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

constexpr int64_t kB = 2, kT = 5, kHeads = 4, kKvHeads = 2, kD = 6;
constexpr int64_t kWidth = (kHeads + 2 * kKvHeads) * kD;

// The rotation of every q and k head of qkv [B, T, width] by angle(position, i), v copied.
template <class Angle>
std::vector<double> naive_rope(const std::vector<double>& x, int64_t B, int64_t T, int64_t H,
                               int64_t Hkv, int64_t D, int64_t start_pos, Angle angle) {
  const int64_t width = (H + 2 * Hkv) * D, half = D / 2;
  std::vector<double> y = x;
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t h = 0; h < H + Hkv; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double a = angle(start_pos + r % T, i);
        const size_t lo = r * width + h * D + i, hi = lo + half;
        y[lo] = x[lo] * std::cos(a) - x[hi] * std::sin(a);
        y[hi] = x[hi] * std::cos(a) + x[lo] * std::sin(a);
      }
  return y;
}

// angle = position theta^(-2i/D), exactly (in double).
auto exact_angle(double theta, int64_t D) {
  return [=](int64_t p, int64_t i) {
    return static_cast<double>(p) * std::pow(theta, -2.0 * static_cast<double>(i) / D);
  };
}

TEST(Rope, ForwardMatchesNaive) {
  Generator gen(61);
  for (DType dtype : {DType::f64, DType::f32}) {
    const Tensor qkv = randn({kB, kT, kWidth}, gen, 0, 1, dtype);
    const std::vector<double> ref =
        naive_rope(values(qkv), kB, kT, kHeads, kKvHeads, kD, 3, exact_angle(10000, kD));
    const Tensor out = rotary_embedding(qkv, kHeads, kKvHeads, 10000, 3);
    EXPECT_TRUE(
        all_close(out, from_vector(ref, {kB, kT, kWidth}), dtype == DType::f64 ? 1e-12 : 2e-6))
        << dtype_name(dtype);
  }
}

TEST(Rope, F32AnglesAreFormedAsHuggingFaceFormsThem) {
  // At position ~5000 an f32 angle is off the exact one by up to half an f32 ulp of 5000 (2e-4
  // rad): visible in the output. Hugging Face forms inv_freq = 1 / theta^(2i/D) and
  // position * inv_freq in f32 (float32 tensors in PyTorch), which is what the kernels match.
  Generator gen(62);
  const int64_t D = 64, H = 2, Hkv = 1, start = 5000, T = 3;
  const Tensor qkv = randn({1, T, (H + 2 * Hkv) * D}, gen);
  auto f32_angle = [&](int64_t p, int64_t i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(D);
    const float inv_freq = 1.0f / std::pow(500000.0f, exponent);
    return static_cast<double>(static_cast<float>(p) * inv_freq);
  };
  const std::vector<double> hf = naive_rope(values(qkv), 1, T, H, Hkv, D, start, f32_angle);
  const std::vector<double> exact =
      naive_rope(values(qkv), 1, T, H, Hkv, D, start, exact_angle(500000, D));
  const Tensor out = rotary_embedding(qkv, H, Hkv, 500000, start);
  EXPECT_TRUE(all_close(out, from_vector(hf, qkv.shape()), 2e-6));
  // the two references do differ at this position, so the comparison above can tell them apart
  EXPECT_FALSE(all_close(hf, exact, 2e-5));
}

TEST(Rope, VPassesThroughAndTheInputIsNotRotatedInPlace) {
  Generator gen(63);
  const Tensor qkv = randn({kB, kT, kWidth}, gen);
  const std::vector<double> before = values(qkv);
  const Tensor out = rotary_embedding(qkv, kHeads, kKvHeads, 10000);
  EXPECT_EQ(values(qkv), before);
  const std::vector<double> y = values(out);
  for (int64_t r = 0; r < kB * kT; ++r)
    for (int64_t j = (kHeads + kKvHeads) * kD; j < kWidth; ++j)
      EXPECT_EQ(y[r * kWidth + j], before[r * kWidth + j]);
  // position 0 is the identity rotation
  for (int64_t j = 0; j < kWidth; ++j) EXPECT_EQ(y[j], before[j]);
}

TEST(Rope, Gradcheck) {
  Generator gen(64);
  const GradcheckFn f = [](const std::vector<Tensor>& in) {
    return rotary_embedding(in[0], kHeads, kKvHeads, 100, 7);
  };
  EXPECT_TRUE(gradcheck_passes(f, {rnd({kB, kT, kWidth}, gen)}));
  const GradcheckFn mha = [](const std::vector<Tensor>& in) {
    return rotary_embedding(in[0], 2, 2, 10000, 0);
  };
  EXPECT_TRUE(gradcheck_passes(mha, {transpose(rnd({24, 3, 2}, gen), 0, 2)}));  // non-contiguous
}

TEST(Rope, BitIdenticalForAnyThreadCount) {
  Generator gen(65);
  const Tensor qkv = randn({4, 64, 3 * 64}, gen), dout = randn({4, 64, 3 * 64}, gen);
  const GradcheckFn f = [](const std::vector<Tensor>& in) {
    return rotary_embedding(in[0], 1, 1, 10000, 11);
  };
  auto run = [&] { return f32_values(output_and_grads(f, {qkv}, dout)); };
  EXPECT_EQ(with_threads(1, run), with_threads(2, run));
}

// The cpu kernels keep the last few cos/sin tables (kernels/cpu/rope.cpp): calls that differ in
// one argument at a time (length, start position, theta, head dim, dtype, direction), more of
// them than the cache holds, each made twice in a row and the whole sequence twice (hits, misses,
// evictions), each against the naive rotation by the exact angle (backward: by -angle).
TEST(Rope, CachedTablesFollowEveryArgument) {
  struct Call {
    int64_t T, D, start;
    double theta;
    DType dtype;
    bool backward;
  };
  const Call calls[] = {
      {5, 6, 0, 1e4, DType::f32, false}, {5, 6, 0, 1e4, DType::f32, true},
      {3, 6, 0, 1e4, DType::f32, false}, {5, 6, 3, 1e4, DType::f32, false},
      {5, 6, 0, 100, DType::f32, false}, {5, 4, 0, 1e4, DType::f32, false},
      {5, 6, 0, 1e4, DType::f64, false}, {5, 6, 0, 1e4, DType::f64, true},
  };
  Generator gen(66);
  for (int pass = 0; pass < 2; ++pass)
    for (const Call& c : calls)
      for (int repeat = 0; repeat < 2; ++repeat) {
        SCOPED_TRACE(fmt::format("pass {} T {} D {} start {} theta {} {} {}", pass, c.T, c.D,
                                 c.start, c.theta, dtype_name(c.dtype),
                                 c.backward ? "backward" : "forward"));
        const int64_t width = (kHeads + 2 * kKvHeads) * c.D;
        const Tensor x = randn({kB, c.T, width}, gen, 0, 1, c.dtype);
        const auto exact = exact_angle(c.theta, c.D);
        const auto angle = [&](int64_t p, int64_t i) {
          return (c.backward ? -1 : 1) * exact(p, i);
        };
        const std::vector<double> ref =
            naive_rope(values(x), kB, c.T, kHeads, kKvHeads, c.D, c.start, angle);
        const Tensor out = empty_like(x);
        if (c.backward)
          kernels::backend(x).rope_backward(x, out, kHeads, kKvHeads, c.theta, c.start);
        else
          kernels::backend(x).rope_forward(x, out, kHeads, kKvHeads, c.theta, c.start);
        EXPECT_TRUE(
            all_close(out, from_vector(ref, x.shape()), c.dtype == DType::f64 ? 1e-12 : 2e-6));
      }
}

TEST(Rope, RejectsBadShapes) {
  const std::string odd = error_of([] { rotary_embedding(zeros({1, 2, 8 * 5}), 4, 2, 1e4); });
  EXPECT_TRUE(contains_all(odd, {"rotary_embedding", "f32[1, 2, 40]", "D even", "n_head 4",
                                 "n_kv_head 2", "last dimension 40"}));
  const std::string groups = error_of([] { rotary_embedding(zeros({1, 2, 7 * 4}), 3, 2, 1e4); });
  EXPECT_TRUE(contains_all(groups, {"n_kv_head dividing n_head", "n_head 3", "n_kv_head 2"}));
  const std::string width = error_of([] { rotary_embedding(zeros({1, 2, 50}), 4, 2, 1e4); });
  EXPECT_TRUE(contains_all(width, {"(n_head + 2 n_kv_head) D", "last dimension 50", "8 heads"}));
  const std::string rank = error_of([] { rotary_embedding(zeros({2, 48}), 4, 2, 1e4); });
  EXPECT_TRUE(contains_all(rank, {"[B, T, (n_head + 2 n_kv_head) D]", "f32[2, 48]"}));
  const std::string theta = error_of([] { rotary_embedding(zeros({1, 2, 48}), 4, 2, 0); });
  EXPECT_TRUE(contains_all(theta, {"theta 0"}));
}

}  // namespace
}  // namespace glass
