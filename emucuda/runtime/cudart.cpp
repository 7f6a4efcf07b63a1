// The emulated CUDA runtime's API: the functions of <cuda_runtime_api.h> the engine calls, under
// the names of cudart_names.h, with CUDA's semantics on emulated GPUs (streams.h). Device memory
// is host memory from the emulator's allocator (engine/emu/memory.h: 256-byte aligned, fresh
// bytes 0xFF, red zones with GLASS_EMU_CHECK=1), at most GLASS_EMU_GPU_MEMORY bytes per GPU
// (engine/emu/gpu_memory.h).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "emucuda/runtime/capture.h"
#include "emucuda/runtime/runtime.h"
#include "emucuda/runtime/streams.h"
#include "engine/emu/device_limits.h"
#include "engine/emu/memory.h"
#include "engine/emu/shared_memory_limits.h"
#include "engine/emu/static_shared.h"

struct CUevent_st {
  int device = 0;
  bool timing = true;
  glass::emu::runtime::Dependency recorded{nullptr, 0};  // {nullptr, 0}: never recorded
  // Last recorded into a capture (capture.h): the nodes of its graph a wait for it depends on,
  // not work.
  glass::emu::runtime::CapturedEvent captured;
  // When the marker ran, set by the stream's worker (read once the event has completed).
  std::shared_ptr<std::chrono::steady_clock::time_point> time;
};

namespace glass::emu::runtime {
namespace {

thread_local cudaError_t last_error = cudaSuccess;

// Every API call's result goes through here: a failure is also the thread's last error.
cudaError_t result(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

bool valid_device(int d) { return d >= 0 && d < gpu_count(); }

cudaError_t sticky_locked(int device) { return gpu_locked(device).sticky; }

struct KernelEntry {
  const char* name = nullptr;
  KernelBinder bind = nullptr;
  KernelAccessLister accesses = nullptr;
};
// Under state_mutex(); never destroyed (stream workers may run while static destructors do).
std::map<const void*, KernelEntry>& kernels = *new std::map<const void*, KernelEntry>;
std::set<const void*>& pinned = *new std::set<const void*>;  // cudaHostAlloc'd buffers

std::atomic<int> events_alive{0};

bool is_pinned_locked(const void* p) { return pinned.count(p) != 0; }

// Blocks until everything queued on `s` so far has run (a marker on the legacy stream also waits
// for the blocking streams, as cudaStreamSynchronize(0) does).
cudaError_t synchronize_stream(cudaStream_t stream) {
  Dependency d;
  int device;
  {
    std::lock_guard lock(state_mutex());
    CUstream_st* s = resolve_locked(stream);
    if (const cudaError_t e = refuse_on_capturing_stream_locked(s, "cudaStreamSynchronize"))
      return e;
    Operation marker;
    marker.what = "a stream synchronisation";
    d = push_locked(s, std::move(marker));
    device = stream_device(s);
  }
  wait_until(d);
  std::lock_guard lock(state_mutex());
  return sticky_locked(device);
}

cudaError_t synchronize_device(int device) {
  std::vector<Dependency> all;
  {
    std::lock_guard lock(state_mutex());
    for (CUstream_st* s : gpu_locked(device).streams) {
      Operation marker;
      marker.what = "a device synchronisation";
      all.push_back(push_locked(s, std::move(marker)));
    }
  }
  for (const Dependency& d : all) wait_until(d);
  std::lock_guard lock(state_mutex());
  return sticky_locked(device);
}

// A copy (or fill) queued on `stream`. A copy between device memory and pageable host memory
// returns only once it has run, as CUDA's does (the driver copies through its own staging
// buffer); with pinned host memory, and device to device, it is asynchronous.
cudaError_t queue_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       cudaStream_t stream, bool synchronous) {
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  Dependency done;
  int device;
  {
    std::lock_guard lock(state_mutex());
    CUstream_st* s = resolve_locked(stream);
    device = stream_device(s);
    if (const cudaError_t e = sticky_locked(device)) return e;
    const bool to_host = kind == cudaMemcpyDeviceToHost;
    const bool from_host = kind == cudaMemcpyHostToDevice;
    const void* host = to_host ? dst : from_host ? src : nullptr;
    if (host != nullptr && !is_pinned_locked(host)) {
      // With pageable memory the copy returns only once done: a capturing stream cannot.
      if (const cudaError_t e =
              refuse_on_capturing_stream_locked(s, "cudaMemcpyAsync with pageable host memory"))
        return e;
      synchronous = true;
    }
    Operation op;
    op.what = to_host     ? "cudaMemcpy to the host"
              : from_host ? "cudaMemcpy to the device"
                          : "cudaMemcpy on the device";
    std::vector<Access> accesses;
    if (!from_host) accesses.push_back({src, false});
    if (!to_host) accesses.push_back({dst, true});
    op.ranges = ranges_locked(accesses);
    op.host_read = to_host;
    op.work = [dst, src, bytes] { std::memmove(dst, src, bytes); };
    done = push_locked(s, std::move(op));
  }
  if (!synchronous) return cudaSuccess;
  wait_until(done);
  std::lock_guard lock(state_mutex());
  return sticky_locked(device);
}

cudaError_t queue_fill(void* dst, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  if (const cudaError_t e = sticky_locked(stream_device(s))) return e;
  Operation op;
  op.what = "cudaMemset";
  op.ranges = ranges_locked({{dst, true}});
  op.work = [dst, value, bytes] { std::memset(dst, value, bytes); };
  push_locked(s, std::move(op));
  return cudaSuccess;
}

// The launch checks of a GPU, against device_limits.h, made when the launch is issued.
cudaError_t check_configuration(const void* function, dim3 grid, dim3 block, size_t shared) {
  const DeviceLimits& l = kH200;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > uint64_t(l.max_threads_per_block) ||
      block.x > unsigned(l.max_block_dim_x) || block.y > unsigned(l.max_block_dim_y) ||
      block.z > unsigned(l.max_block_dim_z) || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > uint64_t(l.max_grid_dim_x) || grid.y > unsigned(l.max_grid_dim_y) ||
      grid.z > unsigned(l.max_grid_dim_z))
    return cudaErrorInvalidConfiguration;
  // Over the kernel's dynamic shared memory limit: the GPU refuses the launch ("invalid argument").
  // The limit is the emulator's (shared_memory_limits.h), which its launch enforces too.
  if (shared > glass::emu::max_dynamic_shared_bytes(function)) return cudaErrorInvalidValue;
  return cudaSuccess;
}

}  // namespace

void register_kernel(const void* function, const char* name, KernelBinder bind,
                     KernelAccessLister accesses) {
  std::lock_guard lock(state_mutex());
  KernelEntry& k = kernels[function];
  k.name = name;
  k.bind = bind;
  k.accesses = accesses;
}

// The emulator's registry (shared_memory_limits.h), which cudaFuncSetAttribute writes.
size_t max_dynamic_shared_bytes(const void* function) {
  return glass::emu::max_dynamic_shared_bytes(function);
}

int live_events() { return events_alive; }

}  // namespace glass::emu::runtime

using namespace glass::emu::runtime;
using glass::emu::kH200;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return result(cudaErrorInvalidValue);
  *count = gpu_count();
  if (*count == 0) return result(cudaErrorNoDevice);
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return result(cudaErrorInvalidValue);
  if (gpu_count() == 0) return result(cudaErrorNoDevice);
  *device = current_device();
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return result(cudaErrorInvalidValue);
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "%s", kH200.name);
  prop->totalGlobalMem = glass::emu::gpu_memory_bytes();  // GLASS_EMU_GPU_MEMORY, else the H200's
  prop->sharedMemPerBlock = kH200.shared_per_block;
  prop->sharedMemPerBlockOptin = kH200.shared_per_block_optin;
  prop->sharedMemPerMultiprocessor = kH200.shared_per_multiprocessor;
  prop->regsPerBlock = kH200.registers_per_block;
  prop->regsPerMultiprocessor = kH200.registers_per_multiprocessor;
  prop->warpSize = kH200.warp_size;
  prop->maxThreadsPerBlock = kH200.max_threads_per_block;
  prop->maxThreadsDim[0] = kH200.max_block_dim_x;
  prop->maxThreadsDim[1] = kH200.max_block_dim_y;
  prop->maxThreadsDim[2] = kH200.max_block_dim_z;
  prop->maxGridSize[0] = static_cast<int>(kH200.max_grid_dim_x);
  prop->maxGridSize[1] = kH200.max_grid_dim_y;
  prop->maxGridSize[2] = kH200.max_grid_dim_z;
  prop->major = kH200.compute_major;
  prop->minor = kH200.compute_minor;
  prop->multiProcessorCount = kH200.multiprocessors;
  prop->maxThreadsPerMultiProcessor = kH200.max_threads_per_multiprocessor;
  prop->maxBlocksPerMultiProcessor = kH200.max_blocks_per_multiprocessor;
  prop->l2CacheSize = static_cast<int>(kH200.l2_cache_bytes);
  prop->memoryBusWidth = kH200.memory_bus_bits;
  prop->concurrentKernels = 1;
  prop->unifiedAddressing = 1;
  prop->pciBusID = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return result(cudaErrorInvalidValue);
  if (!valid_device(device)) return result(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = kH200.max_threads_per_block;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = int(kH200.shared_per_block);
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = int(kH200.shared_per_block_optin);
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = kH200.multiprocessors;
      break;
    case cudaDevAttrWarpSize:
      *value = kH200.warp_size;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = kH200.compute_major;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = kH200.compute_minor;
      break;
    case cudaDevAttrClockRate:
      *value = kH200.clock_khz;
      break;
    case cudaDevAttrMemoryClockRate:
      *value = kH200.memory_clock_khz;
      break;
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = kH200.memory_bus_bits;
      break;
    case cudaDevAttrL2CacheSize:
      *value = int(kH200.l2_cache_bytes);
      break;
    case cudaDevAttrMaxRegistersPerBlock:
      *value = kH200.registers_per_block;
      break;
    default:
      return result(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (gpu_count() == 0) return result(cudaErrorNoDevice);
  if (const cudaError_t e = refuse_unsafe_call("cudaDeviceSynchronize")) return result(e);
  return result(synchronize_device(current_device()));
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return result(cudaErrorInvalidValue);
  if (gpu_count() == 0) return result(cudaErrorNoDevice);
  const glass::emu::GpuMemoryInfo info = glass::emu::gpu_memory_info(current_device());
  *free = info.free;
  *total = info.total;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return last_error; }

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidDeviceFunction:
      return "cudaErrorInvalidDeviceFunction";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureIsolation:
      return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit:
      return "cudaErrorStreamCaptureImplicit";
    case cudaErrorStreamCaptureWrongThread:
      return "cudaErrorStreamCaptureWrongThread";
    case cudaErrorStreamCaptureMerge:
      return "cudaErrorStreamCaptureMerge";
    case cudaErrorStreamCaptureUnmatched:
      return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined:
      return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureIsolation:
      return "dependency created on uncaptured work in another stream";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorStreamCaptureWrongThread:
      return "attempt to terminate a thread-local capture sequence from another thread";
    case cudaErrorStreamCaptureMerge:
      return "operation would merge two independent capture sequences";
    case cudaErrorStreamCaptureUnmatched:
      return "the capture was not begun on this stream";
    case cudaErrorStreamCaptureUnjoined:
      return "the capture has a forked stream that was not joined back to the stream that began it";
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorNotSupported:
      return "operation not supported";
    default:
      return "unknown error";
  }
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  if (p == nullptr) return result(cudaErrorInvalidValue);
  if (gpu_count() == 0) return result(cudaErrorNoDevice);
  if (const cudaError_t e = refuse_unsafe_call("cudaMalloc")) return result(e);
  // Each emulated GPU has GLASS_EMU_GPU_MEMORY bytes (gpu_memory.h): past them, as past a GPU's.
  try {
    *p = glass::emu::device_malloc(bytes, current_device());
  } catch (const glass::emu::OutOfDeviceMemory&) {
    return result(cudaErrorMemoryAllocation);
  }
  add_allocation(*p, bytes);
  return cudaSuccess;
}

// cudaFree waits for the GPU first, as CUDA's does: no queued work can still use the memory.
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  if (const cudaError_t e = refuse_unsafe_call("cudaFree")) return result(e);
  if (const cudaError_t e = synchronize_device(current_device())) return result(e);
  remove_allocation(p);
  try {
    glass::emu::device_free(p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "glass emulated CUDA runtime: cudaFree: %s\n", e.what());
    return result(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int flags) {
  if (p == nullptr) return result(cudaErrorInvalidValue);
  if (const cudaError_t e = refuse_unsafe_call("cudaHostAlloc")) return result(e);
  *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (*p == nullptr) return result(cudaErrorMemoryAllocation);
  std::lock_guard lock(state_mutex());
  pinned.insert(*p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) { return cudaHostAlloc(p, bytes, 0); }

cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  {
    std::lock_guard lock(state_mutex());
    if (pinned.erase(p) == 0) return result(cudaErrorInvalidValue);
  }
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (const cudaError_t e = refuse_unsafe_call("cudaMemcpy")) return result(e);
  return result(queue_copy(dst, src, bytes, kind, nullptr, true));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return result(queue_copy(dst, src, bytes, kind, stream, false));
}

cudaError_t cudaMemset(void* dst, int value, size_t bytes) {
  if (const cudaError_t e = refuse_unsafe_call("cudaMemset")) return result(e);
  return result(queue_fill(dst, value, bytes, nullptr));
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  return result(queue_fill(dst, value, bytes, stream));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr) return result(cudaErrorInvalidValue);
  if (gpu_count() == 0) return result(cudaErrorNoDevice);
  *stream = create_stream(current_device(), (flags & cudaStreamNonBlocking) != 0);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return result(cudaErrorInvalidResourceHandle);
  destroy_stream(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return result(synchronize_stream(stream));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  if (const cudaError_t e = sticky_locked(stream_device(s))) return result(e);
  if (const cudaError_t e = refuse_on_capturing_stream_locked(s, "cudaStreamQuery"))
    return result(e);
  Operation marker;
  marker.what = "a stream query";
  // Whether everything before a marker pushed now has run, without waiting for the marker.
  const Dependency d = push_locked(s, std::move(marker));
  return has_run_locked({d.stream, d.seq - 1}) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  if (device == nullptr) return result(cudaErrorInvalidValue);
  std::lock_guard lock(state_mutex());
  *device = stream_device(resolve_locked(stream));
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (event == nullptr) return result(cudaErrorInvalidResourceHandle);
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  if (capture_active_locked(event->captured.capture)) {
    // An event of a capture orders nodes of its graph: the waiting stream forks into the capture,
    // or, already in it, its next node depends on the event's nodes (a join when it is the stream
    // that began the capture).
    return result(wait_in_capture_locked(s, event->captured));
  }
  if (is_capturing_locked(s) && event->recorded.stream != nullptr) {
    // A captured stream may not depend on work outside its capture.
    refuse_on_capturing_stream_locked(s, "cudaStreamWaitEvent on an event recorded outside it");
    return result(cudaErrorStreamCaptureIsolation);
  }
  push_wait_locked(s, event->recorded);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return result(cudaErrorInvalidValue);
  if (gpu_count() == 0) return result(cudaErrorNoDevice);
  *event = new CUevent_st;
  ++events_alive;
  (*event)->device = current_device();
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

// Like CUDA, destroying an event whose record has not completed is allowed: the marker keeps
// its own time slot.
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return result(cudaErrorInvalidResourceHandle);
  delete event;
  --events_alive;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return result(cudaErrorInvalidResourceHandle);
  std::lock_guard lock(state_mutex());
  CUstream_st* s = resolve_locked(stream);
  // CUDA: "cudaEventRecord() will fail if the input event and input stream are associated to
  // different devices" (an event belongs to the device current when it was created).
  if (event->device != stream_device(s)) return result(cudaErrorInvalidResourceHandle);
  auto time = std::make_shared<std::chrono::steady_clock::time_point>();
  Operation marker;
  marker.what = "an event record";
  marker.work = [time] { *time = std::chrono::steady_clock::now(); };
  event->recorded = push_locked(s, std::move(marker));
  event->captured = captured_event_locked(s);  // after the marker: a wait depends on it
  event->time = time;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return result(cudaErrorInvalidResourceHandle);
  std::lock_guard lock(state_mutex());
  // Recorded into a capture still going on: not work.
  if (const cudaError_t e =
          refuse_event_of_capture_locked(event->captured.capture, "cudaEventQuery"))
    return result(e);
  if (event->recorded.stream != nullptr)
    if (const cudaError_t e = sticky_locked(stream_device(event->recorded.stream)))
      return result(e);
  return has_run_locked(event->recorded) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return result(cudaErrorInvalidResourceHandle);
  Dependency d;
  {
    std::lock_guard lock(state_mutex());
    if (const cudaError_t e =
            refuse_event_of_capture_locked(event->captured.capture, "cudaEventSynchronize"))
      return result(e);
    d = event->recorded;
  }
  wait_until(d);
  std::lock_guard lock(state_mutex());
  return d.stream == nullptr ? cudaSuccess : result(sticky_locked(stream_device(d.stream)));
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return result(cudaErrorInvalidValue);
  if (start == nullptr || end == nullptr) return result(cudaErrorInvalidResourceHandle);
  std::lock_guard lock(state_mutex());
  if (!start->timing || !end->timing || start->time == nullptr || end->time == nullptr)
    return result(cudaErrorInvalidResourceHandle);
  if (!has_run_locked(start->recorded) || !has_run_locked(end->recorded))
    return result(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(*end->time - *start->time).count();
  return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void* function, dim3 grid, dim3 block, void** args,
                             size_t shared, cudaStream_t stream) {
  std::lock_guard lock(state_mutex());
  auto it = kernels.find(function);
  if (it == kernels.end() || it->second.bind == nullptr)
    return result(cudaErrorInvalidDeviceFunction);
  const KernelEntry& k = it->second;
  CUstream_st* s = resolve_locked(stream);
  // CUDA: "a kernel launch will fail if it is issued to a stream that is not associated to the
  // current device" (a multi-GPU program must make the stream's device current first).
  if (stream_device(s) != current_device()) return result(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = sticky_locked(stream_device(s))) return result(e);
  if (const cudaError_t e = check_configuration(function, grid, block, shared)) return result(e);
  std::vector<Access> accesses;
  k.accesses(args, accesses);
  Operation op;
  op.what = std::string("kernel '") + k.name + "'";
  op.ranges = ranges_locked(accesses);
  op.work = k.bind(function, k.name, grid, block, shared, args);
  push_locked(s, std::move(op));
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attr, int value) {
  if (function == nullptr) return result(cudaErrorInvalidDeviceFunction);
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || size_t(value) > kH200.shared_per_block_optin)
    return result(cudaErrorInvalidValue);
  std::lock_guard lock(state_mutex());
  auto it = kernels.find(function);
  const char* name = it == kernels.end() || it->second.name == nullptr ? "?" : it->second.name;
  glass::emu::set_max_dynamic_shared_bytes(function, name, size_t(value));  // checked above
  return cudaSuccess;
}

// What the emulator knows of a kernel: its static __shared__ bytes as its launches so far have
// measured them (0 before its first launch: the emulator learns them by running it, and checks
// static + dynamic against the limits at every launch anyway), the dynamic shared memory it may
// use, and the block limit. Registers and local memory are ptxas's business (the nvcc build's
// kernel_resources.json), 0 here.
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, const void* function) {
  if (attributes == nullptr) return result(cudaErrorInvalidValue);
  if (function == nullptr) return result(cudaErrorInvalidDeviceFunction);
  std::lock_guard lock(state_mutex());
  auto it = kernels.find(function);
  const char* name = it == kernels.end() || it->second.name == nullptr ? "?" : it->second.name;
  size_t static_bytes = 0;
  if (const auto known = glass::emu::detail::known_static_shared(function, name))
    for (size_t i : *known) static_bytes += glass::emu::detail::static_shared_variables()[i].bytes;
  *attributes = cudaFuncAttributes{};
  attributes->sharedSizeBytes = static_bytes;
  attributes->maxDynamicSharedSizeBytes =
      static_cast<int>(glass::emu::max_dynamic_shared_bytes(function));
  attributes->maxThreadsPerBlock = 1024;
  attributes->binaryVersion = attributes->ptxVersion = 90;
  return cudaSuccess;
}

}  // extern "C"
