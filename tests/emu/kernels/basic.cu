// Kernels without barriers: indexing, tails, vector and bf16 types, intrinsics, errors.
#include <cuda_bf16.h>

#include <stdexcept>

#include "engine/emu/launch.h"
#include "kernels/cuda/vector_row.h"

__global__ void scale_add(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Every thread of a 3D grid of 3D blocks adds 1 to its own slot, in the order CUDA numbers them.
__global__ void write_thread_ids(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  out[block * per_block + thread] += 1;
}

__global__ void bf16_round_trip(const float4* x, __nv_bfloat16* y, float* back, int n4) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  const float4 v = __ldg(&x[i]);
  const float in[4] = {v.x, v.y, v.z, v.w};
  for (int k = 0; k < 4; ++k) {
    y[4 * i + k] = __float2bfloat16(in[k]);
    back[4 * i + k] = __bfloat162float(y[4 * i + k]);
  }
}

__global__ void math_intrinsics(float* f, int* i) {
  f[0] = __expf(1.0f);
  f[1] = rsqrtf(4.0f);
  f[2] = __fdividef(1.0f, 8.0f);
  f[3] = fmaxf(-1.0f, 2.0f);
  f[4] = min(3.0f, -2.0f);
  f[5] = tanhf(0.0f);
  f[6] = __saturatef(1.5f);
  f[7] = __int_as_float(0x3f800000);
  i[0] = max(-3, 7);
  i[1] = __popc(0xF0F0u);
  i[2] = __ffs(8);
  i[3] = static_cast<int>(__brev(1u));
  i[4] = __clz(1);
  i[5] = __float_as_int(1.0f);
  i[6] = __float2int_rn(2.5f);
}

// A local object whose destructor counts: shows that threads suspended at the barrier unwind
// when another thread fails.
struct CountDestruction {
  int* counter;
  ~CountDestruction() { atomicAdd(counter, 1); }
};

__global__ void trap_in_thread(int bad_thread, int* destroyed) {
  CountDestruction guard{destroyed};
  if (static_cast<int>(threadIdx.x) == bad_thread) __trap();
  __syncthreads();
}

__global__ void throw_in_thread(int bad_thread) {
  if (static_cast<int>(threadIdx.x) == bad_thread) throw std::out_of_range("index 42 too large");
}

__global__ void launch_inside_kernel(float* x) {
  glass::emu::launch_kernel("child", dim3(1), dim3(1), 0, [x] { x[0] = 1.0f; });
}

// Copies n floats (a multiple of 4) in 16-byte vectors through kernels/cuda/vector_row.h's
// load_vec and store_vec: x and y must be 16-byte aligned, as on a GPU.
__global__ void copy_vectors(const float* x, float* y, int n) {
  using glass::kernels::cuda::load_vec;
  using glass::kernels::cuda::store_vec;
  const int i = 4 * static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i + 4 <= n) store_vec(y + i, load_vec(x + i));
}
