// How many threads the `cpu` kernels use: OpenMP loops and OpenBLAS alike.
#pragma once

namespace glass::kernels::cpu {

// 0 = every core. Returns the count in effect.
int set_threads(int threads);
int num_threads();

}  // namespace glass::kernels::cpu
