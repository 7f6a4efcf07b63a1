// Block-wide reductions for the row-wise ladders (softmax_ladder.cu, layernorm_ladder.cu): the two
// ways the threads of a block combine one partial value each into one result.
//
//   serial:  each thread writes its partial to shared memory, and thread 0 adds them one by one.
//            blockDim.x - 1 dependent operations on one thread while the rest of the block waits:
//            the coalesced rung's reduction, simple to read and slow for big blocks.
//   shuffle: a butterfly of warp shuffles inside each warp (5 steps, values move between
//            registers, no memory), then the at most 32 warp results through shared memory: the
//            production kernels' block_reduce (kernels/cuda/common.h), which the later rungs use.
//
// Both give every thread the result, hold barriers (every thread of the block must call them)
// and fix the order of every operation in the code, so results are bit-identical run to run.
#pragma once

#include "kernels/cuda/common.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD::ladder {

constexpr int kMaxBlock = 512;  // threads per block of the row-wise rungs, at most

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

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD::ladder
