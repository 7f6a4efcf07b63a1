// The kernels bench_emu times (declared for the host in kernels.h): one without barriers, one
// made of barriers and shuffles, and loops of a single barrier or shuffle.

__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = gelu(x[i]);
}

constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Reduces over the block (blockDim.x a multiple of 32): every warp reduces, then warp 0 combines
// the partial results; each thread gets the block's result.
template <class Reduce>
__device__ float block_reduce(float v, float* scratch, float identity, Reduce reduce) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = reduce(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : identity;
  v = reduce(v);
  __syncthreads();  // scratch is reused by the next reduction
  return v;
}

// One block per row.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float scratch[32];
  const float* row = x + static_cast<size_t>(blockIdx.x) * cols;
  float* out = y + static_cast<size_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = block_reduce(m, scratch, -INFINITY, warp_max);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
  s = block_reduce(s, scratch, 0.0f, warp_sum);
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) * inv;
}

// `iterations` barriers per thread, and nothing else.
__global__ void barrier_loop(float* out, int iterations) {
  float v = threadIdx.x;
  for (int i = 0; i < iterations; ++i) {
    v += 1.0f;
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// `iterations` shuffles per thread, and nothing else.
__global__ void shuffle_loop(float* out, int iterations) {
  float v = threadIdx.x;
  for (int i = 0; i < iterations; ++i) v += __shfl_xor_sync(kFull, v, 1);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}
