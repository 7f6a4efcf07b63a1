// The emulated CUDA runtime (emucuda/runtime) against CUDA's documented semantics: work on a
// stream is deferred and runs in stream order; events order streams; the legacy default stream
// waits for blocking streams but not for non-blocking ones; launches over a limit fail as on the
// GPU; several emulated GPUs; the stream checks report a host read racing a queued write and a
// free of a block a queued operation still uses. The suite runs with GLASS_EMU_GPUS=2 and
// GLASS_EMU_STREAM_CHECK=1 (environment.cpp).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "emucuda/runtime/kernel_trampoline.h"
#include "emucuda/runtime/runtime.h"
#include "emucuda/tests/runtime/gate.h"
#include "engine/emu/device_limits.h"

namespace glass {
namespace {

using emu::runtime::take_stream_reports;
using testing::Gate;

float* device_floats(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
  return static_cast<float*>(p);
}

void set_on_device(float* d, float value) {
  EXPECT_EQ(cudaMemcpy(d, &value, sizeof value, cudaMemcpyHostToDevice), cudaSuccess);
}

float get_from_device(const float* d) {
  float v = 0;
  EXPECT_EQ(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

TEST(EmulatedRuntime, WorkOnAStreamIsDeferredUntilTheStreamRuns) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* a = device_floats(1);
  float* b = device_floats(1);
  set_on_device(a, 1.0f);
  set_on_device(b, 0.0f);
  Gate gate;
  gate.queue_on(s, "gated", {});
  ASSERT_EQ(cudaMemcpyAsync(b, a, sizeof(float), cudaMemcpyDeviceToDevice, s), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(get_from_device(b), 0.0f);  // the copy has not run: the stream is busy
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(get_from_device(b), 1.0f);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(s);
  take_stream_reports();
}

TEST(EmulatedRuntime, AnEventWaitOrdersTwoStreams) {
  cudaStream_t producer, consumer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  float* a = device_floats(1);
  float* b = device_floats(1);
  set_on_device(a, 0.0f);
  set_on_device(b, 0.0f);
  cudaEvent_t written;
  ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), cudaSuccess);
  Gate gate;
  gate.queue_on(producer, "producer", {{a, true}}, [a] { *a = 7.0f; });
  ASSERT_EQ(cudaEventRecord(written, producer), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(written), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamWaitEvent(consumer, written, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(b, a, sizeof(float), cudaMemcpyDeviceToDevice, consumer), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(cudaStreamQuery(consumer), cudaErrorNotReady);  // held by the event
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(written), cudaSuccess);
  EXPECT_EQ(get_from_device(b), 7.0f);
  cudaEventDestroy(written);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
}

TEST(EmulatedRuntime, TheLegacyDefaultStreamWaitsForBlockingStreamsOnly) {
  cudaStream_t blocking, non_blocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking), cudaSuccess);
  float* a = device_floats(1);
  set_on_device(a, 0.0f);
  Gate held;  // never opened before the default stream's copy: it must not wait for this one
  held.queue_on(non_blocking, "non-blocking work", {});
  Gate gate;
  gate.queue_on(blocking, "blocking work", {{a, true}}, [a] { *a = 3.0f; });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    gate.open();
  });
  EXPECT_EQ(get_from_device(a), 3.0f);  // the default stream's copy ran after the blocking work
  opener.join();
  EXPECT_EQ(cudaStreamQuery(non_blocking), cudaErrorNotReady);
  held.open();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(a);
  cudaStreamDestroy(blocking);
  cudaStreamDestroy(non_blocking);
}

TEST(EmulatedRuntime, EventsTimeTheWorkBetweenThem) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start, end;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);  // unrecorded
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  ASSERT_EQ(emu::runtime::enqueue(
                s, "sleep", {}, [] { std::this_thread::sleep_for(std::chrono::milliseconds(25)); }),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, s), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 24.0f);
  EXPECT_LT(ms, 5000.0f);
  cudaEventDestroy(start);
  cudaEventDestroy(end);
  cudaStreamDestroy(s);
}

TEST(EmulatedRuntime, SeveralGpusWithTheH200sProperties) {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 2);  // GLASS_EMU_GPUS=2
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 1), cudaSuccess);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.sharedMemPerBlock, 48u * 1024);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, 227u * 1024);
  EXPECT_EQ(prop.regsPerMultiprocessor, 64 * 1024);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(prop.major * 10 + prop.minor, 90);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reading it reset it
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int device = -1;
  ASSERT_EQ(cudaStreamGetDevice(s, &device), cudaSuccess);
  EXPECT_EQ(device, 1);
  cudaStreamDestroy(s);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

// A __global__ function as the emulator runs it: every CUDA thread stores `value`.
void store(float* out, float value) { *out = value; }

// CUDA's rules for several GPUs in one process ("Stream and Event Behavior"): a kernel launch onto
// a stream of another GPU than the current one fails, and so does recording an event on a stream
// of another GPU than the event's; a copy onto such a stream, and a wait for an event of another
// GPU, are allowed.
TEST(EmulatedRuntime, ALaunchOrAnEventRecordOnAnotherGpusStreamFails) {
  emu::runtime::register_kernel(&store, "store");
  const void* kernel = reinterpret_cast<const void*>(&store);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t on_gpu1;
  ASSERT_EQ(cudaStreamCreateWithFlags(&on_gpu1, cudaStreamNonBlocking), cudaSuccess);
  float* out = device_floats(1);  // on GPU 1
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaEvent_t of_gpu0;
  ASSERT_EQ(cudaEventCreate(&of_gpu0), cudaSuccess);
  float value = 3.0f;
  void* args[] = {&out, &value};
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, on_gpu1),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(of_gpu0, on_gpu1), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaEventRecord(of_gpu0, nullptr), cudaSuccess);  // GPU 0's legacy stream
  EXPECT_EQ(cudaStreamWaitEvent(on_gpu1, of_gpu0, 0), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(out, 0, sizeof(float), on_gpu1), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);  // the stream's GPU current: the launch goes
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, 0, on_gpu1), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(on_gpu1), cudaSuccess);
  EXPECT_EQ(get_from_device(out), 3.0f);
  cudaFree(out);
  cudaStreamDestroy(on_gpu1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaEventDestroy(of_gpu0);
}

TEST(EmulatedRuntime, LaunchesCopyTheirArgumentsAndFailOverTheLimitsAsOnTheGpu) {
  const void* kernel = reinterpret_cast<const void*>(&store);
  float* out = device_floats(1);
  float value = 5.0f;
  void* args[] = {&out, &value};
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(32), args, 0, nullptr),
            cudaErrorInvalidDeviceFunction);  // never registered
  emu::runtime::register_kernel(&store, "store");
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  Gate gate;
  gate.queue_on(s, "gated", {});
  ASSERT_EQ(cudaLaunchKernel(kernel, dim3(2), dim3(32), args, 0, s), cudaSuccess);
  value = 6.0f;  // after the launch: the kernel got 5
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(get_from_device(out), 5.0f);

  const emu::DeviceLimits& h200 = emu::kH200;
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(h200.max_threads_per_block + 1), args, 0, s),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(1, 1, 65), args, 0, s),
            cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1, 65536), dim3(1), args, 0, s),
            cudaErrorInvalidConfiguration);
  // Dynamic shared memory: 48 KiB unless the kernel opts in, up to 227 KiB.
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, h200.shared_per_block, s),
            cudaSuccess);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, h200.shared_per_block + 1, s),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(h200.shared_per_block_optin) + 1),
            cudaErrorInvalidValue);
  ASSERT_EQ(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(h200.shared_per_block_optin)),
            cudaSuccess);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(1), args, h200.shared_per_block + 1, s),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaFree(out);
  cudaStreamDestroy(s);
}

TEST(EmulatedRuntime, AFailedKernelIsTheGpusStickyError) {
  ASSERT_EQ(emu::runtime::enqueue(nullptr, "kernel 'trap'", {},
                                  [] { throw std::runtime_error("__trap() at test"); }),
            cudaSuccess);  // reported later, as a kernel fault is
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaErrorLaunchFailure);
  EXPECT_STREQ(cudaGetErrorString(cudaErrorLaunchFailure), "unspecified launch failure");
}

TEST(EmulatedRuntime, StreamCheckReportsAHostReadOfMemoryAQueuedKernelWrites) {
  take_stream_reports();
  cudaStream_t side;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  float* a = device_floats(4);
  Gate gate;
  gate.queue_on(side, "kernel 'writer'", {{a, true}});
  get_from_device(a);  // the default stream does not wait for a non-blocking stream: a race
  const auto reports = take_stream_reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("host read"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("kernel 'writer'"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("stream"), std::string::npos) << reports[0];
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  get_from_device(a);  // ordered now: no report
  EXPECT_TRUE(take_stream_reports().empty());
  cudaFree(a);
  cudaStreamDestroy(side);
}

TEST(EmulatedRuntime, StreamCheckReportsAFreeOfABlockAQueuedOperationUses) {
  take_stream_reports();
  cudaStream_t side;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  float* a = device_floats(4);
  Gate gate;
  gate.queue_on(side, "ncclAllReduce", {{a, true}});
  emu::runtime::check_block_release(a, 16, nullptr);  // freed while the default stream is current
  auto reports = take_stream_reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("free of device memory"), std::string::npos) << reports[0];
  EXPECT_NE(reports[0].find("ncclAllReduce"), std::string::npos) << reports[0];
  emu::runtime::check_block_release(a, 16, side);  // on the stream that uses it: ordered
  EXPECT_TRUE(take_stream_reports().empty());
  gate.open();
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  emu::runtime::check_block_release(a, 16, nullptr);
  EXPECT_TRUE(take_stream_reports().empty());
  cudaFree(a);
  cudaStreamDestroy(side);
}

}  // namespace
}  // namespace glass
