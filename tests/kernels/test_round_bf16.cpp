// The cpu device's fast bf16 rounding (kernels/cpu/round_bf16.h: vcvtne2ps2bf16 where no input is
// subnormal, the rule in integer steps where one is) against bf16::from_float, the one rule every
// device rounds by (engine/dtype.h), written per element and sharing no code with the fast path.
// Checked on every sign and exponent, each at the rounding boundaries of its significand, in
// memory order (whole blocks of subnormals) and shuffled (a subnormal among normals), through
// round_row_to_bf16 and through the bf16 GEMM micro-kernel's stores. On a CPU without
// AVX512-BF16 round_row_to_bf16 is the per-element rule itself, and the GEMM case is skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/sgemm.h"

namespace glass::round_bf16_test {
namespace {

using kernels::cpu::cpu_has_avx512_bf16;
using kernels::cpu::round_row_to_bf16;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Every 16-bit top half (sign, exponent, the significand's top 7 bits) with the bottom halves
// that decide a rounding: exact (0), just above (1), just below a tie (0x7fff), the tie (0x8000),
// just above it (0x8001) and the largest (0xffff). Zeros, subnormals, infinities and NaNs included.
std::vector<float> boundary_values() {
  std::vector<float> values;
  for (uint32_t high = 0; high < 0x10000u; ++high)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      values.push_back(from_bits(high << 16 | low));
  return values;
}

// Rounds `values` with round_row_to_bf16 in rows of `row` values (the last one shorter) and says
// where the result differs from from_float.
int count_differences(const std::vector<float>& values, int64_t row, const std::string& what) {
  std::vector<bf16> rounded(values.size());
  const auto n = static_cast<int64_t>(values.size());
  for (int64_t first = 0; first < n; first += row)
    round_row_to_bf16(values.data() + first, rounded.data() + first, std::min(row, n - first));
  int bad = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t want = bf16::from_float(values[i]).bits;
    if (rounded[i].bits != want && bad++ < 5) {
      uint32_t u;
      std::memcpy(&u, &values[i], 4);
      ADD_FAILURE() << what << ": f32 bits " << std::hex << u << " rounded to " << rounded[i].bits
                    << ", from_float gives " << want;
    }
  }
  return bad;
}

TEST(RoundBf16, RowsGiveFromFloatsBitsOnEveryExponentAndBoundary) {
  std::vector<float> values = boundary_values();
  // rows of 32 k (whole blocks), of 1000 (a tail of 8 each) and of 7 (tails only)
  for (const int64_t row : {int64_t{32768}, int64_t{1000}, int64_t{7}})
    EXPECT_EQ(count_differences(values, row, "in order, rows of " + std::to_string(row)), 0);
  // shuffled: most blocks of 32 mix a subnormal (or several) with normals, NaNs and infinities
  std::shuffle(values.begin(), values.end(), std::mt19937(11));
  EXPECT_EQ(count_differences(values, 32768, "shuffled"), 0);
}

// The micro-kernel's bf16 stores: with A all zeros, C = 0 + bias (exactly bias, but for -0), so the
// rounded result must be from_float(0 + bias) and the GELU destination's from_float(gelu(0 +
// bias)), for biases that are subnormal, normal, infinite and NaN, in whole and partial tiles.
TEST(RoundBf16, GemmTilesRoundTheirStoresAsFromFloat) {
  if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU lacks AVX512-BF16: no fast-path stores";
  kernels::cpu::set_bf16_gemm_fallback(false);
  std::mt19937 rng(3);
  const std::vector<float> all = boundary_values();
  std::uniform_int_distribution<size_t> pick(0, all.size() - 1);
  for (const int64_t n : {int64_t{32}, int64_t{45}, int64_t{96}}) {
    const int64_t m = 19, k = 6;
    std::vector<bf16> a(m * k, bf16::from_float(0.0f)), b(k * n);
    for (bf16& x : b) x = bf16::from_float(std::uniform_real_distribution<float>(-1, 1)(rng));
    std::vector<float> bias(n), c(m * n);
    for (float& x : bias) x = all[pick(rng)];
    bias[0] = from_bits(0x00000001u);  // the smallest subnormal, and one among normals
    bias[n - 1] = -from_bits(0x007fffffu);
    std::vector<bf16> rounded(m * n), activated(m * n);
    kernels::cpu::sgemm_bf16(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(),
                             n, {},
                             {.rounded = rounded.data(),
                              .ld = n,
                              .bias = bias.data(),
                              .gelu = activated.data(),
                              .gelu_ld = n});
    int bad = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const float value = 0.0f + bias[j];
        const uint16_t want = bf16::from_float(value).bits,
                       want_gelu = bf16::from_float(kernels::cpu::gelu_forward_of(value)).bits;
        if (rounded[i * n + j].bits != want && bad++ < 5)
          ADD_FAILURE() << "n=" << n << " (" << i << ", " << j << "): bias " << bias[j]
                        << " rounded to " << rounded[i * n + j].bits << ", want " << want;
        if (activated[i * n + j].bits != want_gelu && bad++ < 5)
          ADD_FAILURE() << "n=" << n << " (" << i << ", " << j << "): gelu of " << bias[j]
                        << " rounded to " << activated[i * n + j].bits << ", want " << want_gelu;
      }
    EXPECT_EQ(bad, 0) << "n=" << n;
  }
}

}  // namespace
}  // namespace glass::round_bf16_test
