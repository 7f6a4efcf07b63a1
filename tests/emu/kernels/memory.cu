// A kernel that writes wherever it is told: thread 0 writes p[offset].
__global__ void write_at(float* p, long offset, float v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) p[offset] = v;
}
