#include "engine/cuda/memory.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/cuda/check.h"
#include "engine/cuda/stream.h"
#include "engine/launch.h"

#if defined(GLASS_CUDA_RUNTIME_EMU)
#include "emucuda/runtime/runtime.h"
#endif

namespace glass::cuda {

namespace {

// Transfers move in chunks of this size through a staging buffer: big enough that the copy engine
// runs at full bandwidth, small enough that a thread's ring stays cheap.
constexpr size_t kStagingBytes = size_t{8} << 20;
// Four: a step's uploads (x and y, all --grad-accum micro-steps stacked in each:
// train/micro_batches.h; the optimizer's scalars; a replay's dropout offset) each get a buffer
// whose last copy finished before the previous step's status read, so none waits, however far the
// GPU lags behind the host. An upload per micro-step overran the ring: the host waited mid-step.
constexpr int kRingBuffers = 4;

// A thread's staging ring: each buffer with an event recorded after the last copy that used it,
// so that a buffer is refilled only once the copy engine has read it.
class StagingRing {
 public:
  StagingRing() {
    for (auto& slot : slots_) {
      slot.buffer = std::make_unique<PinnedBuffer>(kStagingBytes);
      GLASS_CUDA_CHECK(cudaEventCreateWithFlags(&slot.free, cudaEventDisableTiming), "staging");
    }
  }
  ~StagingRing() {
    for (auto& slot : slots_) cudaEventDestroy(slot.free);
  }

  // The next buffer, once its last copy is done (the host waits, and counts it, only if not).
  // A download on the stream of that copy need not wait: stream order puts its copy into the
  // buffer after the earlier one, and the host reads the buffer only after synchronising.
  char* acquire(bool download, cudaStream_t stream) {
    Slot& slot = slots_[next_];
    if (download && slot.stream == stream) return static_cast<char*>(slot.buffer->data());
    const cudaError_t state = cudaEventQuery(slot.free);
    if (state == cudaErrorNotReady) {
      int device = 0;
      cudaGetDevice(&device);
      note_host_sync({DeviceKind::cuda, device}, "staging ring full");
      GLASS_CUDA_CHECK(cudaEventSynchronize(slot.free), "staging");
    } else {  // done, or an error (a fault in earlier work): not a buffer to overwrite silently
      GLASS_CUDA_CHECK(state, "staging (the last copy through this buffer)");
    }
    return static_cast<char*>(slot.buffer->data());
  }
  // Marks the buffer just acquired as in use by the copies queued on `stream` so far.
  void release(cudaStream_t stream) {
    GLASS_CUDA_CHECK(cudaEventRecord(slots_[next_].free, stream), "staging");
    slots_[next_].stream = stream;
    next_ = (next_ + 1) % kRingBuffers;
  }

 private:
  struct Slot {
    std::unique_ptr<PinnedBuffer> buffer;
    cudaEvent_t free = nullptr;
    cudaStream_t stream = nullptr;  // of the last copy
  };
  Slot slots_[kRingBuffers];
  int next_ = 0;
};

StagingRing& staging() {
  thread_local StagingRing ring;
  return ring;
}

}  // namespace

void* device_malloc(size_t bytes) {
  void* p = nullptr;
  // During a graph capture (a miss in the graph's memory pool) cudaMalloc is permitted only in
  // relaxed mode: the allocation is not part of the graph, the pool keeps it for every replay.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const bool relax = capturing_graph();
  if (relax) GLASS_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode), "Allocator on cuda");
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (relax) GLASS_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode), "Allocator on cuda");
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
  int device = 0;
  if (capturing_graph()) cudaGetDevice(&device);
  refuse_in_graph_capture({DeviceKind::cuda, device}, "an upload from host memory",
                          "a replay would copy whatever the staging buffer holds then; copy the "
                          "step's inputs into the graph's own tensors before each replay");
  StagingRing& ring = staging();
  const cudaStream_t stream = current_stream();
  for (size_t at = 0; at < bytes; at += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, bytes - at);
    // 1. host bytes into a free staging buffer
    char* const buf = ring.acquire(false, stream);
    std::memcpy(buf, static_cast<const char*>(host_src) + at, n);
    // 2. the copy engine moves them; the buffer is busy until it has
    GLASS_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(device_dst) + at, buf, n,
                                     cudaMemcpyHostToDevice, stream),
                     "copy to cuda");
    ring.release(stream);
  }
}

void copy_device_to_host(std::span<const HostRead> reads) {
  StagingRing& ring = staging();
  const cudaStream_t stream = current_stream();
  // Pieces of the reads packed into one staging buffer; drained (one stream synchronisation)
  // when the buffer is full and at the end.
  struct Piece {
    char* dst;
    size_t at, n;
  };
  std::vector<Piece> pieces;
  char* buf = nullptr;
  size_t used = 0;
  auto drain = [&] {
    if (!buf) return;
    ring.release(stream);
    GLASS_CUDA_CHECK(cudaStreamSynchronize(stream), "copy from cuda");
    for (const Piece& p : pieces) std::memcpy(p.dst, buf + p.at, p.n);
    pieces.clear();
    buf = nullptr;
    used = 0;
  };
  for (const HostRead& r : reads) {
    for (size_t at = 0; at < r.bytes;) {
      if (!buf) buf = ring.acquire(true, stream);
      const size_t n = std::min(kStagingBytes - used, r.bytes - at);
      GLASS_CUDA_CHECK(cudaMemcpyAsync(buf + used, static_cast<const char*>(r.src) + at, n,
                                       cudaMemcpyDeviceToHost, stream),
                       "copy from cuda");
      pieces.push_back({static_cast<char*>(r.dst) + at, used, n});
      used += n;
      at += n;
      if (used == kStagingBytes) drain();
    }
  }
  drain();
}

void zero_async(void* device_dst, size_t bytes) {
  GLASS_CUDA_CHECK(cudaMemsetAsync(device_dst, 0, bytes, current_stream()), "zero on cuda");
}

}  // namespace glass::cuda
