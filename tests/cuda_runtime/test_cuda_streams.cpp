// The cuda device's own stream code (engine/stream.cpp, engine/cuda, kernels/cuda/gemm.cu) on the
// emulated CUDA runtime, whose streams really are asynchronous. Each test is a defect found in
// review (issue 13), checking the old behaviour. Each failed against the code before its fix (the
// four stream ones against 68b3569, the commit before 96104aa; the cuBLAS one against the old lock
// placement):
// - a Stream on cuda:1 was made on whatever GPU the thread had current;
// - Stream::enqueue on cuda ran the task at once and released what it captured while the GPU work
//   it issued (a collective) was still queued;
// - Event::wait_for busy-polled cudaEventQuery and took a kernel fault for "not ready", so the
//   fault surfaced as a time-out;
// - glass::Event leaked a cudaEvent_t per record;
// - the cuBLAS handle's stream was set under a mutex, but the GEMM issued after the unlock.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "emucuda/tests/runtime/gate.h"
#include "engine/cuda/runtime.h"
#include "engine/cuda/stream.h"
#include "engine/launch.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/backend.h"

namespace glass {
namespace {

using testing::Gate;

const Device kCuda1{DeviceKind::cuda, 1};

TEST(CudaStreams, AStreamBelongsToItsOwnGpuWhateverGpuIsCurrent) {
  cuda::require_device(0);
  Stream s(kCuda1);
  int device = -1;
  ASSERT_EQ(cudaStreamGetDevice(static_cast<cudaStream_t>(s.native()), &device), cudaSuccess);
  EXPECT_EQ(device, 1);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, 0);  // the caller's GPU is left as it was
}

TEST(CudaStreams, EnqueueKeepsWhatATaskCapturesUntilItsGpuWorkHasRun) {
  Stream s(kCUDA);
  Gate gate;
  auto captured = std::make_shared<int>(1);
  std::weak_ptr<int> watch = captured;
  const cudaStream_t native = static_cast<cudaStream_t>(s.native());
  s.enqueue([captured, native, &gate] { gate.queue_on(native, "a collective", {}); });
  captured.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(watch.expired()) << "released while the GPU work it issued is still queued";
  gate.open();
  s.synchronize();
  EXPECT_TRUE(watch.expired());
}

TEST(CudaStreams, EventWaitForReportsAKernelFaultAtOnce) {
  Stream s(kCUDA);
  const cudaStream_t native = static_cast<cudaStream_t>(s.native());
  s.enqueue([native] {
    ASSERT_EQ(emu::runtime::enqueue(native, "kernel 'faulty'", {},
                                    [] { throw std::runtime_error("illegal address"); }),
              cudaSuccess);
  });
  Event e;
  e.record(s);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(e.wait_for(std::chrono::seconds(3)), std::exception);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(CudaStreams, EventsLeaveNoCudaEventBehind) {
  Stream s(kCUDA);
  s.synchronize();
  const int before = emu::runtime::live_events();
  for (int i = 0; i < 20; ++i) {
    Event e;
    e.record(s);
    e.synchronize();
  }
  EXPECT_EQ(emu::runtime::live_events(), before);
}

// While the first GEMM is inside the gateway (its handle already set to its stream), a second
// thread issues a GEMM on another stream; the observer is the hook between cublasSetStream and the
// GEMM. The first stream is held by a gate, so a GEMM queued there cannot run; one queued on the
// second stream runs at once. With the handle unlocked before the GEMM is issued (the defect), the
// second thread moves the handle to the second stream and the first GEMM runs there, while its own
// stream is still held.
class SecondGemmDuringFirst : public LaunchObserver {
 public:
  std::function<void()> second;
  std::future<void> second_done;
  std::atomic<bool> armed{false}, started{false};

  void on_launch_begin(const LaunchInfo& info) override {
    if (!armed || std::string(info.kernel) != "cublasSgemmStridedBatched" || fired_.exchange(true))
      return;
    second_done = std::async(std::launch::async, second);
    // Time for the second GEMM to be issued, unless it waits for the handle (with the fix it does,
    // until the first GEMM has been issued).
    second_done.wait_for(std::chrono::milliseconds(300));
    started = true;
  }

 private:
  std::atomic<bool> fired_{false};
};

TEST(CudaStreams, AGemmRunsOnTheStreamItWasIssuedOn) {
  Stream first(kCUDA), second(kCUDA);
  const std::vector<float> ones(4, 1.0f);
  const Tensor a = Tensor::from_host(ones.data(), {2, 2}, DType::f32, kCUDA);
  const Tensor c1 = Tensor::empty({2, 2}, DType::f32, kCUDA);
  const Tensor c2 = Tensor::empty({2, 2}, DType::f32, kCUDA);
  auto gemm_into = [&](const Tensor& c) {  // c = a a: every element 2
    kernels::GemmArgs g;
    g.a = a;
    g.b = a;
    g.c = c;
    g.m = g.n = g.k = 2;
    g.lda = g.ldb = g.ldc = 2;
    kernels::backend(kCUDA).gemm(g);
  };
  auto read = [](const Tensor& c) {  // a synchronous copy: waits for neither engine stream
    std::vector<float> got(4);
    EXPECT_EQ(cudaMemcpy(got.data(), c.raw_data(), 16, cudaMemcpyDeviceToHost), cudaSuccess);
    return got;
  };
  SecondGemmDuringFirst observer;
  observer.second = [&] {
    second.enqueue([&] { gemm_into(c2); });
    second.synchronize();
  };
  subscribe(&observer);
  // While observed, launches are timed with CUDA events; the timer anchors its clock once per
  // thread with a device synchronisation, which must happen before the first stream is held.
  first.enqueue([&] { gemm_into(c1); });
  second.enqueue([&] { gemm_into(c2); });
  first.synchronize();
  second.synchronize();
  const std::vector<float> unset(4, -1.0f);
  for (const Tensor* c : {&c1, &c2})
    ASSERT_EQ(cudaMemcpy(c->raw_data(), unset.data(), 16, cudaMemcpyHostToDevice), cudaSuccess);
  Gate gate;  // holds the first stream
  gate.queue_on(static_cast<cudaStream_t>(first.native()), "gated", {});
  observer.armed = true;
  first.enqueue([&] { gemm_into(c1); });  // on first's worker, with first's CUDA stream current
  while (!observer.started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // The first GEMM is issued right after the hook returns; on the held stream it cannot run. Half
  // a second of watching: on the second stream it would have run long before.
  bool ran_while_held = false;
  for (int i = 0; i < 50 && !ran_while_held; ++i) {
    ran_while_held = read(c1)[0] != -1.0f;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(ran_while_held) << "the first GEMM ran while its stream was held: it was queued on "
                                  "the second stream";
  gate.open();  // the first GEMM runs, its timing ends, and the handle is free for the second
  observer.second_done.wait();
  first.synchronize();
  unsubscribe(&observer);
  EXPECT_EQ(read(c1), std::vector<float>(4, 2.0f));
  EXPECT_EQ(read(c2), std::vector<float>(4, 2.0f));
  emu::runtime::take_stream_reports();  // the reads of c1 above raced the held stream on purpose
}

}  // namespace
}  // namespace glass
