#include "engine/cuda/memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "engine/cuda/check.h"
#include "engine/cuda/stream.h"

#if defined(GLASS_CUDA_RUNTIME_EMU)
#include "engine/emu/runtime/runtime.h"
#endif

namespace glass::cuda {

namespace {

// Transfers move in chunks of this size through the staging buffer: big enough that the copy
// engine runs at full bandwidth, small enough that a thread's staging buffer stays cheap.
constexpr size_t kStagingBytes = size_t{8} << 20;

PinnedBuffer& staging() {
  thread_local std::unique_ptr<PinnedBuffer> buffer;
  if (!buffer) buffer = std::make_unique<PinnedBuffer>(kStagingBytes);
  return *buffer;
}

// One chunk at a time: host bytes into the staging buffer, the copy engine moves the chunk on
// the current stream, the stream is synchronised (the chunk has arrived, the staging buffer is
// free again), and for a download the bytes go from the staging buffer to their destination.
void transfer(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, const char* what) {
  PinnedBuffer& stage = staging();
  char* const buf = static_cast<char*>(stage.data());
  const cudaStream_t stream = current_stream();
  const bool upload = kind == cudaMemcpyHostToDevice;
  for (size_t at = 0; at < bytes; at += stage.size()) {
    const size_t n = std::min(stage.size(), bytes - at);
    char* const to = static_cast<char*>(dst) + at;
    const char* const from = static_cast<const char*>(src) + at;
    if (upload) std::memcpy(buf, from, n);
    GLASS_CUDA_CHECK(cudaMemcpyAsync(upload ? to : buf, upload ? buf : from, n, kind, stream),
                     what);
    GLASS_CUDA_CHECK(cudaStreamSynchronize(stream), what);
    if (!upload) std::memcpy(to, buf, n);
  }
}

}  // namespace

void* device_malloc(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  GLASS_CUDA_CHECK(err, "Allocator on cuda");
  return p;
}

void device_free(void* ptr) { GLASS_CUDA_CHECK(cudaFree(ptr), "Allocator on cuda"); }

void check_block_release(void* ptr, size_t bytes, void* stream) {
#if defined(GLASS_CUDA_RUNTIME_EMU)
  glass::emu::runtime::check_block_release(ptr, bytes, static_cast<cudaStream_t>(stream));
#else
  (void)ptr, (void)bytes, (void)stream;
#endif
}

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes) {
  GLASS_CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocDefault), "PinnedBuffer");
}

PinnedBuffer::~PinnedBuffer() { cudaFreeHost(data_); }

void copy_host_to_device(void* device_dst, const void* host_src, size_t bytes) {
  transfer(device_dst, host_src, bytes, cudaMemcpyHostToDevice, "copy to cuda");
}

void copy_device_to_host(void* host_dst, const void* device_src, size_t bytes) {
  transfer(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, "copy from cuda");
}

}  // namespace glass::cuda
