// The `cuda` device's runtime (engine/device_runtime.h) over the CUDA runtime API: memory from
// cudaMalloc (engine/cuda/memory.h), copies through a pinned staging ring on the current stream,
// CUDA streams and events (engine/cuda/stream.h), one GPU per index ("cuda:N"), and kernel times
// on the GPU's clock (engine/cuda/launch_timer.h). On the emulated CUDA runtime
// (-DGLASS_CUDA_RUNTIME=emu) the same calls run on emulated GPUs. Compiled only with GLASS_CUDA.
#include <cuda_runtime_api.h>

#include <charconv>

#include "engine/cuda/check.h"
#include "engine/cuda/launch_timer.h"
#include "engine/cuda/memory.h"
#include "engine/cuda/runtime.h"
#include "engine/cuda/stream.h"
#include "engine/device_runtime.h"
#include "engine/error.h"

namespace glass {

namespace {

// A glass::Stream's CUDA stream, made on its own GPU whatever GPU the calling thread has current.
class CudaNativeStream final : public NativeStream {
 public:
  CudaNativeStream(int gpu, int id) : gpu_(gpu) {
    const cuda::DeviceGuard on_gpu(gpu);
    stream_ = std::make_unique<cuda::Stream>(id);
  }

  void* handle() const override { return stream_->handle(); }

  // Its GPU and the stream, current until the guard goes (the GPU current before is restored).
  std::shared_ptr<void> make_current() const override {
    struct Current {
      cuda::DeviceGuard gpu;
      cuda::StreamGuard stream;
    };
    return std::shared_ptr<Current>(
        new Current{cuda::DeviceGuard(gpu_), cuda::StreamGuard(*stream_)});
  }

  void synchronize() const override { stream_->synchronize(); }

  void wait_for_calling_thread() const override {
    cuda::Event done;
    done.record(cuda::current_stream());
    stream_->wait(done.handle());
  }

  void join_calling_thread() const override {
    cuda::Event done;
    done.record(stream_->handle());
    GLASS_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done.handle(), 0),
                     "Stream::join_calling_thread");
  }

 private:
  int gpu_;
  std::unique_ptr<cuda::Stream> stream_;
};

// An emulated GPU (-DGLASS_CUDA_RUNTIME=emu) is not "a GPU": auto never picks one, so that a test
// or a user run without --device behaves as on a machine without a GPU; --device cuda asks for it.
#if defined(GLASS_CUDA_RUNTIME_EMU)
constexpr bool kRealGpus = false;
constexpr const char* kMemorySource =
    "cudaMemGetInfo (the emulated CUDA runtime: GLASS_EMU_GPU_MEMORY)";
#else
constexpr bool kRealGpus = true;
constexpr const char* kMemorySource = "cudaMemGetInfo";
#endif

class CudaRuntime final : public DeviceRuntime {
 public:
  CudaRuntime()
      : DeviceRuntime(DeviceKind::cuda, "cuda",
                      {.cuda_kernels = true,
                       .fused_classifier = true,
                       .gemm_workspace = true,
                       .device_scalars = true,
                       .tf32 = true,
                       .bf16_by_default = true,
                       .kernel_ladders = true,
                       .cudnn_attention = true,
                       .graphs = true,
                       .native_streams = true,
                       .device_flags = true,
                       .several_devices = true,
                       .picked_by_auto = kRealGpus}) {}

  void require(Device d) const override { cuda::require_device(d.index); }
  int device_count() const override { return cuda::device_count(); }

  // "cuda" -> 0, "cuda:N" -> N; throws naming `name` for anything else ("cuda:", "cuda:x",
  // "cuda:-1"). `name` starts with "cuda" (Device::parse).
  int parse_index(const std::string& name) const override {
    if (name == "cuda") return 0;
    int index = -1;
    const char* first = name.data() + 5;  // after "cuda:"
    const char* last = name.data() + name.size();
    const auto [end, ec] = std::from_chars(first, last, index);
    GLASS_CHECK(name[4] == ':' && first != last && ec == std::errc() && end == last && index >= 0,
                "bad device '{}': expected cuda or cuda:N with N a GPU index (0, 1, ...)", name);
    return index;
  }

  std::string hardware_name(Device d) const override { return cuda::gpu_name(d.index); }
  void synchronize(Device d) const override { cuda::synchronize_device(d.index); }
  void synchronize_after_launch() const override {
    cudaError_t err = cudaDeviceSynchronize();
    if (err == cudaSuccess) err = cudaGetLastError();
    GLASS_CHECK(err == cudaSuccess, "{}", cudaGetErrorString(err));
  }

  // On the current GPU (the allocator's own: Allocator::for_device makes it current).
  void* device_malloc(Device, size_t bytes) const override { return cuda::device_malloc(bytes); }
  void device_free(Device, void* ptr) const override { cuda::device_free(ptr); }
  void check_block_release(void* ptr, size_t bytes, void* stream) const override {
    cuda::check_block_release(ptr, bytes, stream);
  }
  std::optional<DeviceMemory> memory_info(Device d) const override {
    const cuda::DeviceGuard guard(d.index);
    size_t free = 0, total = 0;
    GLASS_CUDA_CHECK(cudaMemGetInfo(&free, &total),
                     "device_memory (free and total bytes of the GPU)");
    return DeviceMemory{static_cast<int64_t>(free), static_cast<int64_t>(total), kMemorySource};
  }

  // Through a pinned staging ring, on the current stream; the host does not wait.
  void copy_from_host(void* device_dst, const void* host_src, size_t bytes) const override {
    cuda::copy_host_to_device(device_dst, host_src, bytes);
  }
  void read_to_host(std::span<const HostRead> reads) const override {
    cuda::copy_device_to_host(reads);
  }
  void zero(void* device_dst, size_t bytes) const override { cuda::zero_async(device_dst, bytes); }

  void* current_stream() const override { return cuda::current_stream(); }
  std::unique_ptr<NativeStream> make_stream(Device d, int id) const override {
    return std::make_unique<CudaNativeStream>(d.index, id);
  }
  void* record_event(void* stream) const override {
    auto event = std::make_unique<cuda::Event>();
    event->record(static_cast<cudaStream_t>(stream));
    return event.release();
  }
  bool event_done(void* event) const override { return static_cast<cuda::Event*>(event)->done(); }
  void release_event(void* event) const override { delete static_cast<cuda::Event*>(event); }

  bool time_on_device(void* stream, const std::function<void()>& issue, double (*clock_us)(),
                      double& start_us, double& end_us) const override {
    const cuda::GpuSpan span =
        cuda::time_on_gpu(static_cast<cudaStream_t>(stream), issue, clock_us);
    start_us = span.start_us;
    end_us = span.end_us;
    return true;
  }
};

}  // namespace

const DeviceRuntime& cuda_runtime() {
  // Never destroyed: tensors kept in statics are freed through it at exit.
  static const CudaRuntime& runtime = *new CudaRuntime;
  return runtime;
}

}  // namespace glass
