// GPU memory: raw cudaMalloc/cudaFree for the caching Allocator, pinned (page-locked) host
// buffers, and host <-> device transfers on the current stream.
//
// A transfer from pageable memory makes the driver copy through its own staging buffer and
// cannot overlap anything; from pinned memory the copy engine reads host RAM by DMA. So every
// host <-> device copy of a tensor (Tensor::from_host, copy_to_host: batches, weights, values a
// test reads back) goes through a ring of pinned staging buffers of the calling thread, in
// chunks; an upload does not wait for its copies, a download waits once.
#pragma once

#include <cstddef>
#include <span>

#include "engine/device_flags.h"

namespace glass::cuda {

// cudaMalloc on the current device: nullptr when the GPU is out of memory (the caller may free
// its cache and retry); any other failure throws.
void* device_malloc(size_t bytes);
void device_free(void* ptr);

// The caching allocator puts a block back on its free list, tagged with `stream` (the current
// one): from then on the block may be handed out again for work on that stream. On the emulated
// CUDA runtime with its stream check on (GLASS_EMU_STREAM_CHECK=1) this reports queued work on
// another stream that still uses the block; on a GPU it does nothing.
void check_block_release(void* ptr, size_t bytes, void* stream);

// A page-locked host buffer (cudaHostAlloc), freed with the object.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Copies `bytes` from host memory to device memory on the current stream without waiting for the
// copy: the bytes go into a free buffer of this thread's pinned staging ring, and cudaMemcpyAsync
// moves them from there; the source may be reused at once. The host waits only when every buffer
// of the ring still has a copy in flight (counted as a host sync), which a batch of a few MB
// never meets.
void copy_host_to_device(void* device_dst, const void* host_src, size_t bytes);
// Copies every read from device to host memory through the staging ring, with one stream
// synchronisation when they fit in one buffer (a loss and a few flags always do); returns when
// the data is in place. Callers count the synchronisation (engine/device_flags.h's read_to_host).
void copy_device_to_host(std::span<const HostRead> reads);
// Zeroes device memory on the current stream (cudaMemsetAsync), without waiting.
void zero_async(void* device_dst, size_t bytes);

}  // namespace glass::cuda
