// Block-wide reductions for the row-wise ladders (softmax_ladder.cu, layernorm_ladder.cu): the two
// ways the threads of a block combine one partial value each into one result.
//
//   serial:  each thread writes its partial to shared memory, and thread 0 adds them one by one.
//            blockDim.x - 1 dependent operations on one thread while the rest of the block waits:
//            the coalesced rung's reduction, simple to read and slow for big blocks.
//   shuffle: a butterfly of warp shuffles inside each warp (5 steps, values move between
//            registers, no memory), then the at most 32 warp results through shared memory: the
//            reduction of the production kernels (kernels/cuda/softmax.cu, layernorm.cu).
//
// Both give every thread the result, hold barriers (every thread of the block must call them)
// and fix the order of every operation in the code, so results are bit-identical run to run.
#pragma once

namespace glass::kernels::cuda::ladder {

constexpr int kMaxBlock = 512;  // threads per block of the row-wise rungs, at most
constexpr unsigned kFullMask = 0xffffffffu;

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <class Op>
__device__ float block_reduce_serial(float value, Op op) {
  __shared__ float partials[kMaxBlock];
  __shared__ float result;
  partials[threadIdx.x] = value;
  __syncthreads();
  if (threadIdx.x == 0) {
    float r = partials[0];
    for (unsigned t = 1; t < blockDim.x; ++t) r = op(r, partials[t]);
    result = r;
  }
  __syncthreads();
  const float r = result;
  __syncthreads();  // partials and result may be overwritten by the next reduction
  return r;
}

// blockDim.x must be a multiple of 32.
template <class Op>
__device__ float block_reduce_shuffle(float value, Op op) {
  __shared__ float warp_results[32];
  // 1. inside each warp: after the butterfly every lane holds the warp's result
  for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2)
    value = op(value, __shfl_xor_sync(kFullMask, value, lane_mask));
  if (threadIdx.x % 32 == 0) warp_results[threadIdx.x / 32] = value;
  __syncthreads();
  // 2. across warps, in warp order
  float r = warp_results[0];
  for (unsigned w = 1; w < blockDim.x / 32; ++w) r = op(r, warp_results[w]);
  __syncthreads();  // warp_results may be overwritten by the next reduction
  return r;
}

}  // namespace glass::kernels::cuda::ladder
