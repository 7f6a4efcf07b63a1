// The cpu kernels' row primitives (kernels/cpu/cpu.h) against plain loops in double: the masked
// softmax row that softmax, naive attention and flash attention share, in whole 16-float blocks
// (a row with room for them) and entry by entry (a row without), with NaN and huge scores in the
// masked entries, which it must never use.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/cpu.h"

namespace {

using glass::kernels::cpu::masked_softmax_row;

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
