// What the cpu forwards of LayerNorm and RMSNorm share (kernels/cpu/layernorm.cpp, rmsnorm.cpp):
// rows taken kNormGroupRows at a time, so that their sums run side by side (cpu.h's
// row_group_sums; one row at a time, a 256-wide row's sums were chains of dependent adds that took
// 30% of LayerNorm's forward, bench/RESULTS.md), and the fused residual add in front of both.
#pragma once

#include <cstdint>

#include "kernels/cpu/cpu.h"

namespace glass::kernels::cpu {

constexpr int kNormGroupRows = 4;

// The kRows rows from `first` that a norm normalises (row stride C): x's, or with delta,
// residual = x + delta, stored (rounded once to T) and normalised as stored, as on emu and cuda.
template <int kRows, class T>
void rows_to_normalise(const T* x, const T* delta, T* residual, int64_t C, int64_t first,
                       const T* (&row)[kRows]) {
  for (int q = 0; q < kRows; ++q) {
    const int64_t r = first + q;
    row[q] = x + r * C;
    if (delta == nullptr) continue;
    const T *xr = row[q], *dr = delta + r * C;
    T* sr = residual + r * C;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) sr[j] = from_compute<T>(to_compute(xr[j]) + to_compute(dr[j]));
    row[q] = sr;
  }
}

// group.template operator()<kRows>(first) for all `rows` rows, kNormGroupRows at a time (the last
// few one by one), the groups in parallel when worth it (for_each_row).
template <class Group>
void for_each_norm_group(int64_t rows, int64_t elements, Group&& group) {
  const int64_t groups = (rows + kNormGroupRows - 1) / kNormGroupRows;
  for_each_row(groups, elements, [&](int64_t index) {
    const int64_t first = index * kNormGroupRows;
    if (first + kNormGroupRows <= rows) return group.template operator()<kNormGroupRows>(first);
    for (int64_t r = first; r < rows; ++r) group.template operator()<1>(r);
  });
}

}  // namespace glass::kernels::cpu
