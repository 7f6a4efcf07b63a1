// Kernels with warp shuffles, votes and __syncwarp.
#include <cuda_bf16.h>

constexpr unsigned kFull = 0xffffffffu;

// Sum of each warp's 32 values, by halving shuffles; lane 0 writes it.
__global__ void warp_sum(const float* x, float* sums) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[t];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(kFull, v, offset);
  if (threadIdx.x % 32 == 0) sums[t / 32] = v;
}

// Every thread offers 1000 + threadIdx.x and records what the chosen shuffle returns.
__global__ void shuffle_lane_ids(int* out, int mode, int lane_arg, int width) {
  const int v = 1000 + static_cast<int>(threadIdx.x);
  int r = 0;
  switch (mode) {
    case 0:
      r = __shfl_sync(kFull, v, lane_arg, width);
      break;
    case 1:
      r = __shfl_up_sync(kFull, v, static_cast<unsigned>(lane_arg), width);
      break;
    case 2:
      r = __shfl_down_sync(kFull, v, static_cast<unsigned>(lane_arg), width);
      break;
    default:
      r = __shfl_xor_sync(kFull, v, lane_arg, width);
      break;
  }
  out[threadIdx.x] = r;
}

__global__ void shuffle_types(double* d, long long* ll, float* f, unsigned* u, __nv_bfloat16* h) {
  const int lane = threadIdx.x % 32;
  h[threadIdx.x] = __shfl_xor_sync(kFull, __float2bfloat16(static_cast<float>(lane)), 1);
  d[threadIdx.x] = __shfl_xor_sync(kFull, 1e10 + 0.25 * lane, 1);
  ll[threadIdx.x] = __shfl_xor_sync(kFull, (1LL << 40) + lane, 1);
  f[threadIdx.x] = __shfl_xor_sync(kFull, -0.5f * lane, 1);
  u[threadIdx.x] = __shfl_xor_sync(kFull, 0x80000000u + lane, 1);
}

__global__ void warp_votes(unsigned* ballot, int* any, int* all) {
  const int t = threadIdx.x;
  ballot[t] = __ballot_sync(kFull, t % 3 == 0);
  any[t] = __any_sync(kFull, t == 40);
  all[t] = __all_sync(kFull, t != 40);
}

// The two half-warps shuffle independently, each with its own mask.
__global__ void disjoint_mask_shuffles(int* out) {
  const int lane = threadIdx.x;
  if (lane < 16)
    out[lane] = __shfl_down_sync(0x0000ffffu, lane, 1, 16);
  else
    out[lane] = __shfl_up_sync(0xffff0000u, lane, 1, 16);
}

// One shuffle, reached from two branches (allowed since sm_70: lanes match by mask).
__global__ void shuffle_from_two_sites(int* out) {
  const int lane = threadIdx.x;
  if (lane < 16)
    out[lane] = __shfl_xor_sync(kFull, lane, 16);
  else
    out[lane] = __shfl_xor_sync(kFull, lane + 100, 16);
}

__global__ void warp_sync_exchange(int* out) {
  __shared__ int s[32];
  const int lane = threadIdx.x;
  s[lane] = 2 * lane;
  __syncwarp();
  out[lane] = s[(lane + 1) % 32];
}

// PLANTED BUG: half the warp shuffles while the other half votes, both with the full mask.
__global__ void shuffle_and_vote_mixed(int* out) {
  const int lane = threadIdx.x;
  if (lane < 16)
    out[lane] = __shfl_sync(kFull, lane, 0);
  else
    out[lane] = static_cast<int>(__ballot_sync(kFull, 1));
}

// PLANTED BUG: each lane names only its neighbour in the mask.
__global__ void shuffle_mask_without_caller(int* out) {
  const unsigned lane = threadIdx.x;
  out[lane] = __shfl_sync(1u << ((lane + 1) % 32), static_cast<int>(lane), 0);
}

__global__ void active_lanes(unsigned* out) { out[threadIdx.x] = __activemask(); }
