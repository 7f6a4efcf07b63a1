// round_row_to_bf16 (kernels/cpu/cpu.h): 32 values per vcvtne2ps2bf16 where the CPU has
// AVX512-BF16 (kernels/cpu/round_bf16.h says why that is from_float's rule exactly), the rule per
// element elsewhere.
#include "kernels/cpu/round_bf16.h"

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/sgemm.h"  // cpu_has_avx512_bf16

namespace glass::kernels::cpu {

namespace {

void round_row_by_element(const float* from, bf16* to, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) to[j] = bf16::from_float(from[j]);
}

#if defined(__x86_64__)
__attribute__((target(GLASS_BF16_ROUND_TARGET))) void round_row_by_instruction(const float* from,
                                                                               bf16* to,
                                                                               int64_t n) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32)
    _mm512_storeu_si512(
        to + j, round_pair_to_bf16(_mm512_loadu_ps(from + j), _mm512_loadu_ps(from + j + 16)));
  if (j < n) round_row_by_element(from + j, to + j, n - j);
}
#endif

}  // namespace

void round_row_to_bf16(const float* from, bf16* to, int64_t n) {
#if defined(__x86_64__)
  if (cpu_has_avx512_bf16()) return round_row_by_instruction(from, to, n);
#endif
  round_row_by_element(from, to, n);
}

}  // namespace glass::kernels::cpu
