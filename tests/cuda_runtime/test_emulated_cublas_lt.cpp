// cuBLASLt for `cuda` on the emulated CUDA runtime (kernels/cuda/gemm_lt.cu against the emulated
// cuBLASLt's stream-ordered handle): the fused GEMM is queued on the stream it is issued on and
// runs after the work queued there before it, as on a GPU, with its descriptors copied at the call
// (gemm_lt.cu destroys them as soon as cublasLtMatmul returns). Had the emulated cuBLASLt run the
// product at the call, the first check below fails; had it kept pointers to the descriptors, the
// product reads freed memory (AddressSanitizer) or wrong values.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "emucuda/tests/runtime/gate.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::Gate;

// Host values of a float tensor through a synchronous copy (which waits for neither engine stream:
// they are non-blocking).
std::vector<float> read(const Tensor& t) {
  std::vector<float> got(static_cast<size_t>(t.numel()));
  EXPECT_EQ(cudaMemcpy(got.data(), t.raw_data(), t.nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return got;
}

TEST(EmulatedCublasLt, AGemmWithABiasIsQueuedOnItsStreamAndRunsAfterTheWorkBeforeIt) {
  Stream s(kCUDA);
  // C = A B + bias: A 2x3, B 3x2, bias one value per column of C.
  const std::vector<float> a_host{1, 2, 3, 4, 5, 6}, b_host{1, 0, 0, 1, 1, 1}, bias_host{10, 20};
  const Tensor a = Tensor::from_host(a_host.data(), {2, 3}, DType::f32, kCUDA);
  const Tensor b = Tensor::from_host(b_host.data(), {3, 2}, DType::f32, kCUDA);
  const Tensor bias = Tensor::from_host(bias_host.data(), {2}, DType::f32, kCUDA);
  const Tensor c = Tensor::empty({2, 2}, DType::f32, kCUDA);
  const std::vector<float> unset(4, -1.0f);
  ASSERT_EQ(cudaMemcpy(c.raw_data(), unset.data(), 16, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads are queued on the default stream

  Gate gate;  // holds the stream: what is queued behind it cannot run
  gate.queue_on(static_cast<cudaStream_t>(s.native()), "gated", {});
  std::atomic<bool> issued{false};
  s.enqueue([&] {  // a GEMM with a bias is cuBLASLt's BIAS epilogue (gemm.cu -> gemm_lt.cu)
    kernels::GemmArgs g;
    g.a = a;
    g.b = b;
    g.c = c;
    g.bias = bias;
    g.m = 2, g.n = 2, g.k = 3;
    g.lda = 3, g.ldb = 2, g.ldc = 2;
    kernels::backend(kCUDA).gemm(g);
    issued = true;
  });
  while (!issued) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(read(c), unset) << "the fused GEMM ran before the work queued before it";
  gate.open();
  s.synchronize();
  // A B = [[4, 5], [10, 11]], plus 10 and 20 by column.
  EXPECT_EQ(read(c), (std::vector<float>{14, 25, 20, 31}));
  emu::runtime::take_stream_reports();  // the read of c while queued raced the stream on purpose
}

}  // namespace
}  // namespace glass
