// The emulated CUDA runtime's own C++ interface: what the emulated libraries (cuBLAS, NCCL), the
// kernel launcher and the tests need beyond CUDA's API. The CUDA API itself (cudaMalloc,
// cudaLaunchKernel, ...) is in cudart.cpp under the names of cudart_names.h.
//
// Model (README.md, "The emulated CUDA runtime"): each stream, the legacy default stream of each
// emulated GPU included, is a queue with a worker thread. Work given to a stream runs later on that
// worker, in stream order, after the event waits queued before it; the legacy default stream
// waits for the blocking streams of its GPU and they for it. Nothing waits for the GPU unless the
// program synchronises (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, a
// synchronous cudaMemcpy, cudaFree).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

namespace glass::emu::runtime {

// A device pointer a queued operation reads or writes; the checks of Settings (GLASS_EMU_STREAM_
// CHECK) compare them. The range is the whole allocation the pointer falls in.
struct Access {
  const void* pointer;
  bool writes;
};

// Queues `work` (run on the stream's worker) on `stream` (nullptr: the legacy default stream of the
// calling thread's current GPU). `what` names it in reports ("kernel 'softmax'", "cublasSgemm").
// An exception thrown by `work` is printed and becomes the GPU's sticky error
// (cudaErrorLaunchFailure), returned by every later synchronising call, as a kernel fault is.
cudaError_t enqueue(cudaStream_t stream, std::string what, std::vector<Access> accesses,
                    std::function<void()> work);

// Kernels: launch_cuda_kernel (kernels/cuda/kernel_launcher.h) registers, before each
// cudaLaunchKernel, a typed trampoline for the __global__ function (kernel_trampoline.h): `bind`
// copies the arguments out of cudaLaunchKernel's array (as the GPU copies them at launch) and
// returns the launch to run later; `accesses` lists the pointer parameters (a pointer to non-const
// is counted as written).
using KernelBinder = std::function<void()> (*)(const void* function, const char* name, dim3 grid,
                                               dim3 block, size_t dynamic_shared_bytes,
                                               void** args);
using KernelAccessLister = void (*)(void** args, std::vector<Access>& out);
void register_kernel(const void* function, const char* name, KernelBinder bind,
                     KernelAccessLister accesses);

// The dynamic shared memory a kernel may use per block: 48 KiB, or what cudaFuncSetAttribute(
// cudaFuncAttributeMaxDynamicSharedMemorySize) raised it to (up to 227 KiB). A hook of the runtime
// until the emulator's launch checks keep a registry of their own (glass::emu, wt-emucheck).
size_t max_dynamic_shared_bytes(const void* function);

// Reports of the stream checks (GLASS_EMU_STREAM_CHECK=1), oldest first; taking them clears the
// list. Each is also printed to stderr when it is made.
std::vector<std::string> take_stream_reports();

// The caching allocator hands a block back to its free list while `stream` is current: with the
// stream checks on, a report for each queued (not yet run) operation on another stream that uses
// the block, since the block may be handed out again at once.
void check_block_release(const void* pointer, size_t bytes, cudaStream_t stream);

// Emulated GPUs: GLASS_EMU_GPUS (default 1; 0 = no GPU, cudaGetDeviceCount fails as without a
// driver), each with the limits of device_limits.h.
int gpu_count();

// Events made by cudaEventCreate* and not yet destroyed (tests look for leaks).
int live_events();

}  // namespace glass::emu::runtime
