// Kernels timed by bench_emu (kernels.cu, compiled for emu).
#pragma once

void gelu_kernel(const float* x, float* y, int n);
void softmax_kernel(const float* x, float* y, int cols);
void barrier_loop(float* out, int iterations);
void shuffle_loop(float* out, int iterations);
