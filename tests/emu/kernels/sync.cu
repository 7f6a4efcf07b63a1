// Kernels with block barriers and shared memory, including planted barrier bugs.
#include "engine/emu/dynamic_shared.h"

constexpr int kBlock = 256;

// Tree reduction of each block's slice of x; blockDim.x == kBlock.
__global__ void block_sum(const float* x, float* sums, int n) {
  __shared__ float s[kBlock];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
    if (static_cast<int>(threadIdx.x) < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = s[0];
}

// PLANTED BUG: no barrier between filling s and the first reduction step.
__global__ void block_sum_missing_barrier(const float* x, float* sums, int n) {
  __shared__ float s[kBlock];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
    if (static_cast<int>(threadIdx.x) < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) sums[blockIdx.x] = s[0];
}

// y[i] = x[i - 1] within each block (the first thread reads its own).
__global__ void read_left_neighbour(const float* x, float* y) {
  __shared__ float s[kBlock];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = x[i];
  __syncthreads();
  y[i] = s[threadIdx.x == 0 ? 0 : threadIdx.x - 1];
}

// PLANTED BUG: the same without the barrier. Threads started in index order happen to find
// their neighbour's value already written.
__global__ void read_left_neighbour_missing_barrier(const float* x, float* y) {
  __shared__ float s[kBlock];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = x[i];
  y[i] = s[threadIdx.x == 0 ? 0 : threadIdx.x - 1];
}

// PLANTED BUG: the first warp and the rest wait at different barriers.
__global__ void divergent_barrier(float* out) {
  __shared__ float s[64];
  if (threadIdx.x < 32) {
    s[threadIdx.x] = 1.0f;
    __syncthreads();
  } else {
    s[threadIdx.x] = 2.0f;
    __syncthreads();
  }
  out[threadIdx.x] = s[63 - threadIdx.x];
}

// Threads past the end return before the barrier; exited threads count as arrived.
__global__ void early_exit_before_barrier(const int* x, int* y, int n) {
  __shared__ int s[128];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  s[threadIdx.x] = x[i];
  __syncthreads();
  const int last =
      min(static_cast<int>(blockDim.x), n - static_cast<int>(blockIdx.x * blockDim.x)) - 1;
  y[i] = s[last - threadIdx.x];
}

__global__ void barrier_votes(int* out) {
  const int t = threadIdx.x;
  out[0] = __syncthreads_count(t % 3 == 0);
  out[1] = __syncthreads_and(t >= 0);
  out[2] = __syncthreads_and(t != 5);
  out[3] = __syncthreads_or(t == 77);
  out[4] = __syncthreads_or(t < 0);
}

// 2D blocks of 32 x 8 threads move a 32 x 32 tile through shared memory.
__global__ void transpose_tile(const float* in, float* out, int rows, int cols) {
  __shared__ float tile[32][33];
  int x = blockIdx.x * 32 + threadIdx.x;
  int y = blockIdx.y * 32 + threadIdx.y;
  for (int k = 0; k < 32; k += 8)
    if (x < cols && y + k < rows) tile[threadIdx.y + k][threadIdx.x] = in[(y + k) * cols + x];
  __syncthreads();
  x = blockIdx.y * 32 + threadIdx.x;
  y = blockIdx.x * 32 + threadIdx.y;
  for (int k = 0; k < 32; k += 8)
    if (x < rows && y + k < cols) out[(y + k) * rows + x] = tile[threadIdx.x][threadIdx.y + k];
}

// Reverses each block's chunk through dynamic shared memory (blockDim.x ints).
__global__ void reverse_dynamic_shared(const int* x, int* y, int n) {
  GLASS_DYNAMIC_SHARED(int, s);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int count =
      min(static_cast<int>(blockDim.x), n - static_cast<int>(blockIdx.x * blockDim.x));
  if (i < n) s[threadIdx.x] = x[i];
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < count) y[i] = s[count - 1 - threadIdx.x];
}

// Reads dynamic shared memory that no thread wrote.
__global__ void read_fresh_dynamic_shared(unsigned* out) {
  GLASS_DYNAMIC_SHARED(unsigned, s);
  out[blockIdx.x * blockDim.x + threadIdx.x] = s[threadIdx.x];
  __syncthreads();
  s[threadIdx.x] = 7;  // the next block must still see fresh memory
}
