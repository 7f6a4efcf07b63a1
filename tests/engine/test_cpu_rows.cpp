// The cpu kernels' row primitives (kernels/cpu/cpu.h) against plain loops in double: the masked
// softmax row that softmax, naive attention and flash attention share, in whole 16-float blocks
// (a row with room for them) and entry by entry (a row without), with NaN and huge scores in the
// masked entries, which it must never use; the exp behind every cpu softmax, GELU and SiLU; and
// the row sums of a group of rows that LayerNorm takes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu.h"

namespace {

using glass::kernels::cpu::exp_vectorisable;
using glass::kernels::cpu::masked_softmax_row;

// exp_vectorisable over x, in a loop the compiler vectorises, as the kernels call it (its clamp's
// bounds are out of the compiler's sight on purpose: kernels/cpu/cpu.h).
std::vector<float> exp_of(const std::vector<float>& x) {
  std::vector<float> y(x.size());
#pragma omp simd
  for (size_t i = 0; i < x.size(); ++i) y[i] = exp_vectorisable(x[i]);
  return y;
}

TEST(CpuRows, ExpMatchesDoubleInsideTheClampAndHoldsItsEndsOutside) {
  // inside [-87, 88]: within 2 ulp-ish of the exact value (the polynomial truncates below 1e-8
  // relative; the rest is f32 rounding)
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.0137f) x.push_back(v);
  std::vector<float> y = exp_of(x);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_NEAR(y[i] / std::exp(double(x[i])), 1.0, 3e-7) << "x " << x[i];
  // outside: the value at the nearer end, never 0, inf or NaN (a softmax's masked score, -inf,
  // must give a finite weight that the row's sums can take)
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> ends = exp_of({-87.0f, 88.0f});
  const std::vector<float> outside = exp_of({-87.5f, -1e4f, -inf, 88.5f, 1e4f, inf});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outside[i], ends[0]) << "below the range, case " << i;
  for (int i = 3; i < 6; ++i) EXPECT_EQ(outside[i], ends[1]) << "above the range, case " << i;
  EXPECT_GT(ends[0], 0.0f);
  EXPECT_TRUE(std::isfinite(ends[1]));
}

TEST(CpuRows, MaskedSoftmaxRowMatchesDoubleAndIgnoresTheMaskedEntries) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-8, 8);
  for (const int64_t cols : {int64_t{48}, int64_t{37}})  // blocks; entry by entry past 32
    for (int64_t len = 1; len <= cols; ++len) {
      // the masked entries: NaN and a huge score in turn (either one, used, spoils the row)
      std::vector<float> x(cols);
      for (int64_t j = 0; j < cols; ++j)
        x[j] = j < len ? uniform(rng) : j % 2 ? 1e30f : std::numeric_limits<float>::quiet_NaN();
      std::vector<float> y(cols, 7.0f);
      const auto lse = masked_softmax_row(x.data(), y.data(), len, cols);
      double m = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; ++j) m = std::max(m, double(x[j]));
      for (int64_t j = 0; j < len; ++j) sum += std::exp(double(x[j]) - m);
      for (int64_t j = 0; j < len; ++j)
        ASSERT_NEAR(y[j], std::exp(double(x[j]) - m) / sum, 1e-6) << "len " << len << " j " << j;
      for (int64_t j = len; j < cols; ++j)
        ASSERT_EQ(y[j], 0.0f) << "masked entry " << j << " of len " << len << ", cols " << cols;
      EXPECT_NEAR(lse.value(), m + std::log(sum), 1e-5) << "len " << len;
      // in place, as flash attention calls it
      std::vector<float> z = x;
      masked_softmax_row(z.data(), z.data(), len, cols);
      EXPECT_EQ(z, y) << "in place, len " << len;
    }
}

}  // namespace

// row_group_sums: each row's sum in its documented order (16 lane sums, lane l adding entries l,
// l + 16, ... in turn, then the lanes halved pairwise), written out here as scalar loops; the same
// bits whether a row is summed alone or in a group of four (so a LayerNorm's results do not depend
// on where a thread's share of rows starts); and within f32 rounding of the sum in double. Rows of
// lengths around the 16-entry blocks, with values that make the order matter (large and small
// values of both signs).
float sum_in_lane_order(const std::vector<float>& x) {
  float lane[16] = {};
  for (size_t j = 0; j < x.size(); ++j) lane[j % 16] += x[j];
  for (int width = 8; width >= 1; width /= 2)
    for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
  return lane[0];
}

TEST(CpuRows, RowGroupSumsFollowTheirOrderWhateverTheGroup) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (const int64_t n : {1, 7, 15, 16, 17, 31, 33, 64, 100, 256, 257}) {
    std::vector<std::vector<float>> rows(4, std::vector<float>(static_cast<size_t>(n)));
    for (auto& row : rows)
      for (float& v : row) v = std::ldexp(mantissa(gen), exponent(gen));
    const auto value = [&](int q, int64_t j) { return rows[static_cast<size_t>(q)][j]; };
    float group[4];
    glass::kernels::cpu::row_group_sums<4>(n, value, group);
    for (int q = 0; q < 4; ++q) {
      float alone[1];
      glass::kernels::cpu::row_group_sums<1>(
          n, [&](int, int64_t j) { return rows[static_cast<size_t>(q)][j]; }, alone);
      double exact = 0, magnitude = 0;
      for (const float v : rows[static_cast<size_t>(q)]) {
        exact += v;
        magnitude += std::fabs(v);
      }
      SCOPED_TRACE("n " + std::to_string(n) + " row " + std::to_string(q));
      EXPECT_EQ(group[q], sum_in_lane_order(rows[static_cast<size_t>(q)]));
      EXPECT_EQ(group[q], alone[0]);
      EXPECT_NEAR(group[q], exact, 8 * std::numeric_limits<float>::epsilon() * magnitude);
    }
  }
}
