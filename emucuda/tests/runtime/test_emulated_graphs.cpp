// Stream capture and CUDA graphs of the emulated CUDA runtime (emucuda/runtime/capture.h)
// against CUDA's documented semantics: a capturing stream runs nothing, each cudaGraphLaunch runs
// the captured work again in order with the arguments it was captured with, a stream that waits
// for an event of a capture is forked into it and must be joined back before the capture ends,
// its branch runs concurrently with the rest at a replay, and calls that cannot be captured fail
// with cudaErrorStreamCaptureUnsupported and invalidate the capture.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "emucuda/runtime/kernel_trampoline.h"
#include "emucuda/runtime/runtime.h"
#include "engine/emu/builtins.h"

namespace glass {
namespace {

// A __global__ function as the emulator runs it: x[i] = x[i] * 2 + add, one thread per element.
void twice_plus(float* x, float add, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] = x[i] * 2 + add;
}

// The same after a pause of 500 ms (time enough for the other branch on a loaded machine), on one
// thread: a slow branch of a graph.
void slow_twice_plus(float* x, float add, int n) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < n; ++i) x[i] = x[i] * 2 + add;
}

struct GraphTest : ::testing::Test {
  void SetUp() override {
    emu::runtime::register_kernel(&twice_plus, "twice_plus");
    emu::runtime::register_kernel(&slow_twice_plus, "slow_twice_plus");
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x), n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&y), n * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), n * sizeof(float), 0), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaFree(x);
    cudaFree(y);
    cudaFreeHost(pinned);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    cudaStreamDestroy(side);
    cudaStreamDestroy(stream);
    emu::runtime::take_stream_reports();
  }
  cudaError_t launch(float add) { return launch_on(x, add, stream); }
  // p = 2p + add on stream `on`.
  static cudaError_t launch_on(float* p, float add, cudaStream_t on) {
    int count = n;
    void* args[] = {&p, &add, &count};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&twice_plus), dim3(1), dim3(32), args, 0,
                            on);
  }
  void fill(float* d, float v) {
    ASSERT_EQ(
        cudaMemcpy(d, std::vector<float>(n, v).data(), n * sizeof(float), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  cudaStreamCaptureStatus capture_status(cudaStream_t s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusInvalidated;
    EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
    return status;
  }
  std::vector<float> read(const float* d) {
    std::vector<float> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  // An event without timing, destroyed with the test.
  cudaEvent_t new_event() {
    cudaEvent_t e = nullptr;
    EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    events.push_back(e);
    return e;
  }
  static constexpr int n = 5;
  cudaStream_t stream = nullptr;
  cudaStream_t side = nullptr;  // a second stream, for fork and join
  std::vector<cudaEvent_t> events;
  float *x = nullptr, *y = nullptr, *pinned = nullptr;
};

TEST_F(GraphTest, ACapturedStreamRunsNothingAndEachLaunchReplaysTheWorkInOrder) {
  // The graph: x = 0; x = 2x + 1; x = 2x + 3; y = x (5 nodes with an event record).
  const cudaEvent_t mark = new_event();
  ASSERT_EQ(
      cudaMemcpy(x, std::vector<float>(n, 7.0f).data(), n * sizeof(float), cudaMemcpyHostToDevice),
      cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemsetAsync(x, 0, n * sizeof(float), stream), cudaSuccess);
  ASSERT_EQ(launch(1.0f), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(mark, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream, mark, 0), cudaSuccess);  // its own event: no-op
  ASSERT_EQ(launch(3.0f), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 5u);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read(x), std::vector<float>(n, 7.0f));  // the capture ran nothing

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);  // the executable graph is its own copy
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read(y), std::vector<float>(n, 5.0f));  // (0*2+1)*2+3
  // A replay starts from the memset again: the same result, not 2*5+..., and eager work between
  // replays is ordered with them on the stream.
  ASSERT_EQ(launch(100.0f), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read(y), std::vector<float>(n, 5.0f));
  EXPECT_EQ(read(x), std::vector<float>(n, 5.0f));
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
}

TEST_F(GraphTest, AReplayReadsThePinnedHostBufferAsItIsWhenTheCopyRuns) {
  // An upload from pinned memory is captured by address: each replay copies what the buffer holds
  // then (the reason a graph's inputs are staged in fixed buffers before each launch).
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(x, pinned, n * sizeof(float), cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(launch(0.5f), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (float v : {1.0f, 4.0f}) {
    for (int i = 0; i < n; ++i) pinned[i] = v;
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(read(x), std::vector<float>(n, 2 * v + 0.5f));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(GraphTest, CallsThatCannotBeCapturedFailAndInvalidateTheCapture) {
  struct Case {
    const char* name;
    std::function<cudaError_t(GraphTest&)> call;
  };
  const std::vector<Case> cases = {
      {"cudaStreamSynchronize", [](GraphTest& t) { return cudaStreamSynchronize(t.stream); }},
      {"cudaStreamQuery", [](GraphTest& t) { return cudaStreamQuery(t.stream); }},
      {"cudaDeviceSynchronize", [](GraphTest&) { return cudaDeviceSynchronize(); }},
      {"cudaMalloc",
       [](GraphTest&) {
         void* p = nullptr;
         return cudaMalloc(&p, 256);
       }},
      {"cudaFree", [](GraphTest& t) { return cudaFree(t.y); }},
      {"cudaMemcpy (synchronous)",
       [](GraphTest& t) {
         float v = 0;
         return cudaMemcpy(&v, t.x, sizeof v, cudaMemcpyDeviceToHost);
       }},
      {"cudaMemcpyAsync to pageable memory",
       [](GraphTest& t) {
         float v = 0;
         return cudaMemcpyAsync(&v, t.x, sizeof v, cudaMemcpyDeviceToHost, t.stream);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    ASSERT_EQ(launch(1.0f), cudaSuccess);
    EXPECT_EQ(c.call(*this), cudaErrorStreamCaptureUnsupported);
    cudaStreamCaptureStatus status;
    ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
    cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
  }
  EXPECT_STREQ(cudaGetErrorString(cudaErrorStreamCaptureUnsupported),
               "operation not permitted when stream is capturing");
  // In relaxed mode the unsafe calls are the caller's business; a synchronisation of the
  // capturing stream itself is still refused.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 256), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

// cudaThreadExchangeStreamCaptureMode: a thread in relaxed mode may cudaMalloc while its own
// global-mode capture runs (what the caching allocator does for a graph's pool), and the capture
// stays valid; swapped back, the same call is refused again. A thread in thread-local mode is not
// bothered by another thread's global capture; in global mode (the default) it is.
TEST_F(GraphTest, RelaxedThreadModeMayAllocateDuringACapture) {
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(launch(1.0f), cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);  // the default it replaced
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 256), cudaSuccess);
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  // Other threads: thread-local mode ignores this thread's global capture, global mode does not.
  cudaError_t thread_local_malloc = cudaErrorUnknown, global_malloc = cudaErrorUnknown;
  void *q = nullptr, *r = nullptr;
  std::thread([&] {
    cudaStreamCaptureMode m = cudaStreamCaptureModeThreadLocal;
    cudaThreadExchangeStreamCaptureMode(&m);
    thread_local_malloc = cudaMalloc(&q, 256);
  }).join();
  EXPECT_EQ(thread_local_malloc, cudaSuccess);
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  std::thread([&] { global_malloc = cudaMalloc(&r, 256); }).join();
  EXPECT_EQ(global_malloc, cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  // Back in global mode on this thread: the call is refused again.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  void* refused = nullptr;
  EXPECT_EQ(cudaMalloc(&refused, 256), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaThreadExchangeStreamCaptureMode(nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(q), cudaSuccess);
}

TEST_F(GraphTest, CaptureRulesOnStreamsAndEvents) {
  cudaGraph_t graph = nullptr;
  // The legacy default stream cannot capture; a stream that is not capturing cannot end one.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureImplicit);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorIllegalState);
  // A capture may not wait for work outside it.
  const cudaEvent_t outside = new_event();
  ASSERT_EQ(cudaEventRecord(outside, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamWaitEvent(stream, outside, 0), cudaErrorStreamCaptureIsolation);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  // An event recorded in a capture is a node, not work: querying it is refused.
  const cudaEvent_t inside = new_event();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(inside, stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(inside), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
}

// Fork and join (capture.h): an event recorded on the capturing stream and waited for by a side
// stream pulls the side stream into the capture; its work is captured, not run, until a replay;
// an event recorded on it and waited for by the capturing stream joins it back.
TEST_F(GraphTest, AForkedStreamIsCapturedAndItsWorkRunsOnlyOnReplay) {
  const cudaEvent_t fork = new_event(), join = new_event();
  fill(x, 7.0f);
  fill(y, 5.0f);
  // The graph: x = 2x + 1 | fork | side: y = x; y = 2y + 1 | join | x = y.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(launch(1.0f), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, stream), cudaSuccess);
  EXPECT_EQ(capture_status(side), cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
  EXPECT_EQ(capture_status(side), cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, side), cudaSuccess);
  ASSERT_EQ(launch_on(y, 1.0f, side), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream, join, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(x, y, n * sizeof(float), cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(capture_status(side), cudaStreamCaptureStatusNone);
  size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 6u);  // 2 kernels, 2 copies, 2 event records
  // Nothing ran, on either stream.
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read(x), std::vector<float>(n, 7.0f));
  EXPECT_EQ(read(y), std::vector<float>(n, 5.0f));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  // Each replay: x = 2x + 1 = 15, y = 2x + 1 = 31, x = 31; then 63, 127, 127.
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read(x), std::vector<float>(n, 31.0f));
  EXPECT_EQ(read(y), std::vector<float>(n, 31.0f));
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read(x), std::vector<float>(n, 127.0f));
  EXPECT_EQ(read(y), std::vector<float>(n, 127.0f));
  // After the capture the side stream runs its own work again.
  ASSERT_EQ(launch_on(y, 0.0f, side), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  EXPECT_EQ(read(y), std::vector<float>(n, 254.0f));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

// At a replay the forked branch runs on a stream of its own, concurrently with the origin's nodes
// that do not depend on it, as on a GPU. So a dependency the capture left out shows as the race it
// would be there: here the origin copies y while the slow side branch still writes it (the copy
// should have waited for an event recorded after the side's kernel), and reads y as it was. Run in
// issue order, the replay would have hidden the missing edge (x = 11). Work queued after the
// launch still waits for both branches.
TEST_F(GraphTest, AReplayRunsAForkedBranchConcurrentlySoAMissingDependencyShows) {
  const cudaEvent_t fork = new_event(), join = new_event();
  fill(x, 7.0f);
  fill(y, 5.0f);
  // The graph: fork | side: y = 2y + 1 (slow) | origin: x = y, without waiting | join.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
  int count = n;
  float add = 1.0f;
  void* args[] = {&y, &add, &count};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void*>(&slow_twice_plus), dim3(1), dim3(1),
                             args, 0, side),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(x, y, n * sizeof(float), cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream, join, 0), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  // queued after the launch: runs once both branches are done, so y is 11 here
  ASSERT_EQ(cudaMemcpyAsync(pinned, y, n * sizeof(float), cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(read(x), std::vector<float>(n, 5.0f)) << "the copy waited for the side branch";
  EXPECT_EQ(std::vector<float>(pinned, pinned + n), std::vector<float>(n, 11.0f));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

// A fork that is not joined back fails the capture's end with cudaErrorStreamCaptureUnjoined, and
// only the stream that began a capture may end it. Waiting for a forked stream on the host (what
// a host-side all-reduce wait does) is refused like any wait for a capturing stream.
TEST_F(GraphTest, AForkMustBeJoinedAndCannotBeWaitedForOnTheHost) {
  const cudaEvent_t fork = new_event();
  fill(y, 5.0f);
  cudaGraph_t graph = nullptr;
  auto begin_and_fork = [&] {
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    ASSERT_EQ(launch(1.0f), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(fork, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
    ASSERT_EQ(launch_on(y, 1.0f, side), cudaSuccess);
  };
  // Unjoined: the side stream's kernel is no ancestor of the capturing stream's last node.
  begin_and_fork();
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(capture_status(stream), cudaStreamCaptureStatusNone);
  EXPECT_EQ(capture_status(side), cudaStreamCaptureStatusNone);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorStreamCaptureUnjoined), "cudaErrorStreamCaptureUnjoined");
  // The captured kernel never ran; the side stream runs eager work again.
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  EXPECT_EQ(read(y), std::vector<float>(n, 5.0f));
  // The forked stream cannot end the capture: only its origin can.
  begin_and_fork();
  EXPECT_EQ(cudaStreamEndCapture(side, &graph), cudaErrorStreamCaptureUnmatched);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  // A host wait for the forked stream is refused and invalidates the capture.
  begin_and_fork();
  EXPECT_EQ(cudaStreamSynchronize(side), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  // Two captures cannot merge: a stream of one waiting for an event of the other.
  cudaStream_t other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(other, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(other, fork, 0), cudaErrorStreamCaptureMerge);
  EXPECT_EQ(cudaStreamEndCapture(other, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  EXPECT_EQ(read(y), std::vector<float>(n, 5.0f));
  cudaGetLastError();
  cudaStreamDestroy(other);
}

// Outside a capture an event orders two streams as before: the waiting stream's copy runs after
// the kernels recorded in the event, whichever stream's worker gets there first.
TEST_F(GraphTest, AnEventWaitAcrossStreamsOutsideACaptureStillOrdersThem) {
  const cudaEvent_t done = new_event();
  fill(x, 1.0f);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(launch(1.0f), cudaSuccess);  // x = 2^21 - 1
  ASSERT_EQ(cudaEventRecord(done, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, done, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, side), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  EXPECT_EQ(read(y), std::vector<float>(n, 2097151.0f));
  EXPECT_EQ(capture_status(side), cudaStreamCaptureStatusNone);
}

}  // namespace
}  // namespace glass
