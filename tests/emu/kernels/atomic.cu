// Kernels that update shared counters from many blocks (which run on several OS threads).
__global__ void atomic_counters(int* i, unsigned* u, unsigned long long* ull, float* f, double* d,
                                int* imax, int* imin) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(i, 1);
  atomicAdd(u, 2u);
  atomicAdd(ull, 1ull << 33);
  atomicAdd(f, 0.5f);  // sums of halves are exact in float up to 2^24
  atomicAdd(d, 0.25);
  atomicMax(imax, t);
  atomicMin(imin, -t);
}

// Increment through a compare-and-swap loop, the way atomics without hardware support are built.
__global__ void cas_increment(int* counter) {
  int old = *counter;
  int assumed;
  do {
    assumed = old;
    old = atomicCAS(counter, assumed, assumed + 1);
  } while (old != assumed);
}

// Every thread swaps its id into one slot; the values handed back are each id but one, plus the
// slot's initial value.
__global__ void exchange_ids(int* slot, int* seen) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const int previous = atomicExch(slot, t);
  atomicAdd(&seen[previous + 1], 1);  // seen[0] counts the initial -1
}

__global__ void wrapping_increment(unsigned* counter, unsigned limit) { atomicInc(counter, limit); }

// Thread t (of 32) sets and clears bit t, flips bit 0, subtracts 1 and counts down.
__global__ void atomic_bit_ops(unsigned* set, unsigned* cleared, unsigned* flipped, int* sub,
                               unsigned* down) {
  const unsigned bit = 1u << threadIdx.x;
  atomicOr(set, bit);
  atomicAnd(cleared, ~bit);
  atomicXor(flipped, 1u);
  atomicSub(sub, 1);
  atomicDec(down, 10u);
}
