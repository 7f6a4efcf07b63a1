// Kernels for the shared memory limits, static shared poisoning and the launch checks
// (GLASS_EMU_RACECHECK, GLASS_EMU_INITCHECK), including planted bugs.
#include "engine/emu/dynamic_shared.h"
#include "kernels/cuda/shared_memory.h"

// PLANTED BUG: reads static shared memory before any thread wrote it, then writes it, so that
// a block that does not start from fresh memory sees the previous block's values.
__global__ void read_static_shared_before_write(unsigned* out, float* f) {
  __shared__ unsigned s[64];
  __shared__ float tile[4][33];
  const unsigned t = threadIdx.x;
  out[blockIdx.x * 64 + t] = s[t];
  f[blockIdx.x * 64 + t] = tile[t % 4][t % 33];
  __syncthreads();
  s[t] = 7;
  tile[t % 4][t % 33] = 1.0f;
}

// 40000 bytes of static shared memory plus whatever dynamic shared memory the launch gives.
__global__ void static_and_dynamic_shared(float* out) {
  __shared__ float big[10000];
  GLASS_DYNAMIC_SHARED(float, dyn);
  big[threadIdx.x] = 1.0f;
  dyn[threadIdx.x] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = big[threadIdx.x] + dyn[threadIdx.x];
}

// Dynamic shared memory only; one kernel per test, because opt-ins last for the process.
__global__ void dynamic_shared_a(float* out) {
  GLASS_DYNAMIC_SHARED(float, dyn);
  dyn[threadIdx.x] = 3.0f;
  __syncthreads();
  out[threadIdx.x] = dyn[threadIdx.x];
}
__global__ void dynamic_shared_b(float* out) {
  GLASS_DYNAMIC_SHARED(float, dyn);
  dyn[threadIdx.x] = 4.0f;
  __syncthreads();
  out[threadIdx.x] = dyn[threadIdx.x];
}

// 52000 bytes of static shared memory: more than a block may declare (nvcc refuses it).
__global__ void too_much_static_shared(float* out) {
  __shared__ float huge[13000];
  huge[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = huge[threadIdx.x];
}

// y[i] = x[i - 1] within blocks of 64 threads; PLANTED BUG: block `racy_block` skips the barrier.
__global__ void neighbour_racy_in_one_block(const float* x, float* y, int racy_block) {
  __shared__ float s[64];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = x[i];
  if (static_cast<int>(blockIdx.x) != racy_block) __syncthreads();
  y[i] = s[threadIdx.x == 0 ? 0 : threadIdx.x - 1];
}

// y[i] = x[i] + 1 for i < n; y past n is left alone.
__global__ void add_one(const float* x, float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

// y[i] = x[i], bit for bit.
__global__ void copy_words(const unsigned* x, unsigned* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

// The opt-in through the launchers' helper (kernels/cuda/shared_memory.h), as a launcher calls it.
__global__ void dynamic_shared_c(float* out) {
  GLASS_DYNAMIC_SHARED(float, dyn);
  dyn[threadIdx.x] = 5.0f;
  __syncthreads();
  out[threadIdx.x] = dyn[threadIdx.x];
}
void allow_dynamic_shared_c(size_t bytes) {
  glass::kernels::cuda::allow_dynamic_shared_memory(dynamic_shared_c, "dynamic_shared_c", bytes,
                                                    glass::Device{glass::DeviceKind::emu});
}

// *sum += x[i] for every i, by float atomics: the rounding depends on the order of the adds, by
// design. With `last` non-null, PLANTED BUG: every thread also stores its index there, a plain
// write whose final value is whichever thread ran last.
__global__ void atomic_sum(const float* x, float* sum, int n, int* last) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(sum, x[i]);
  if (last != nullptr) *last = i;
}
