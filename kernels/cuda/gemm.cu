// cuda GEMM: the engine's one cuBLAS call site. Row-major, strided-batched
//   C[i] = alpha op(A[i]) op(B[i]) (+ bias broadcast over rows) + beta C[i]
// as kernels/backend.h (GemmArgs) defines it, handed to column-major cuBLAS without a copy.
//
// The mapping: a row-major r x c matrix with leading dimension ld is, byte for byte, the
// column-major c x r matrix of its transpose with the same ld. So the row-major product
// C = op(A) op(B) is, read column-major, C^T = op(B)^T op(A)^T: cuBLAS is called with A and B
// swapped, m and n swapped, and the op flags unchanged (B stored row-major as k x n is, column-
// major, the n x k matrix B^T = op(B)^T when op is N; when op is T it is stored n x k row-major,
// i.e. k x n column-major, and cuBLAS's transpose gives op(B)^T again). Leading dimensions carry
// over as they are, and cuBLAS's own checks on them (ld >= rows as stored, column-major) are then
// exactly the row-major checks ld >= row length: a wrong lda, ldb, ldc or transpose flag comes
// back as CUBLAS_STATUS_INVALID_VALUE, on a GPU and on emu alike, and becomes a glass::Error here.
// What cuBLAS cannot see (that every element it will touch lies inside the tensors' storage) is
// checked before the call.
//
// A GEMM with a bias, and under --tf32 every f32 GEMM, goes to cuBLASLt instead (gemm_lt.cu): the
// bias is added by its BIAS epilogue inside the GEMM, and TF32 is one of its compute types. Plain
// f32 GEMMs stay on cublasSgemmStridedBatched, the reference.
//
// Compiled by the host compiler (GLASS_EMU) the same calls are answered by the emulated cuBLAS of
// emucuda/cublas, backed by OpenBLAS: at once for `emu`, queued on the handle's stream for `cuda`
// on the emulated CUDA runtime (create_handle).
//
// dtypes: f32 operands go to cublasSgemmStridedBatched (the f32 reference path: cuBLAS's default
// math mode, no TF32); bf16 operands (mixed precision) to cublasGemmStridedBatchedEx with
// CUDA_R_16BF A, B and C and CUBLAS_COMPUTE_32F: products summed in f32, C rounded once to bf16
// (tensor cores on a GPU). The handle's math mode has CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_
// REDUCTION, so that a split-K algorithm adds its parts in f32 too (else cuBLAS may add them in
// bf16). f64 is for gradcheck on cpu.
#if defined(GLASS_EMU)
#include "emucuda/cublas/cublas_v2.h"
#else
#include <cublas_v2.h>
#endif

#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/costs/gemm.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

// Every argument, for error messages (gemm_lt.cu's too).
std::string describe_gemm_args(const GemmArgs& g) {
  return fmt::format(
      "GemmArgs{{m={}, n={}, k={}, batch={}, trans_a={}, trans_b={}, lda={}, ldb={}, ldc={}, "
      "stride_a={}, stride_b={}, stride_c={}, alpha={}, beta={}, A {}, B {}, C {}, bias {}}}",
      g.m, g.n, g.k, g.batch, g.trans_a, g.trans_b, g.lda, g.ldb, g.ldc, g.stride_a, g.stride_b,
      g.stride_c, g.alpha, g.beta, g.a.describe(), g.b.describe(), g.c.describe(),
      g.bias.describe());
}

Tensor gemm_workspace(Device device) {
  // Keyed by the stream's handle, not its id: the graph stream shares id 0 with the legacy
  // default stream, and the two run unordered. Never destroyed (as the handles below).
  static auto* workspaces = new std::map<std::tuple<int, int, uintptr_t>, Tensor>;
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  Tensor& w = (*workspaces)[{static_cast<int>(device.kind), device.index,
                             reinterpret_cast<uintptr_t>(launch_stream(device))}];
  if (!w.defined()) w = Tensor::empty({kGemmWorkspaceBytes / 4}, DType::i32, device);
  return w;
}

namespace {

void check_cublas(cublasStatus_t status, const char* call, const GemmArgs& g) {
  GLASS_CHECK(status == CUBLAS_STATUS_SUCCESS, "gemm: {} returned {} ({}) for {}", call,
              cublasGetStatusName(status), cublasGetStatusString(status), describe_gemm_args(g));
}

// A new handle for `device`. The host compiler's build serves `cuda` on the emulated CUDA runtime
// too (build.h), whose handles must queue their GEMMs on the stream as cuBLAS does.
cublasStatus_t create_handle(cublasHandle_t* handle, [[maybe_unused]] Device device) {
#if defined(GLASS_EMU) && defined(GLASS_CUDA_BUILD_SERVES_CUDA)
  if (through_cuda_runtime(device)) return glass_emu_cublasCreateStreamOrdered(handle);
#endif
  return cublasCreate(handle);
}

// One cuBLAS handle per device, created on first use (on `cuda`, with that device current: the
// tensors' allocator made it current) and kept for the life of the process: destroying it during
// static destruction could come after the CUDA context it belongs to is gone.
//
// A handle has one stream at a time, and host threads share it (the compute thread, a stream's
// worker): so the handle is held, locked, from cublasSetStream until the GEMM has been issued,
// or another thread could move it to its own stream in between.
class LockedHandle {
 public:
  LockedHandle(Device device, const GemmArgs& g) : lock_(mutex()) {
    static auto* handles = new std::map<std::pair<int, int>, cublasHandle_t>;  // never destroyed
    cublasHandle_t& handle = (*handles)[{static_cast<int>(device.kind), device.index}];
    if (handle == nullptr) {
      check_cublas(create_handle(&handle, device), "cublasCreate", g);
      // bf16 GEMMs sum in f32 (CUBLAS_COMPUTE_32F), and so must any split-K reduction: by default
      // cuBLAS may add the parts in the output type (bf16), which would round every partial sum.
      check_cublas(cublasSetMathMode(handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
                   "cublasSetMathMode", g);
    }
    // The current stream, the one launch_cuda_kernel launches on, so that the GEMM runs in order
    // with the kernels around it (cheap: cuBLAS only stores it). cublasSetStream also resets the
    // workspace to cuBLAS's own pool, which it fills with cudaMallocAsync: inside a graph capture
    // that would record allocations outside glass's allocator, and cuBLAS promises the same bits
    // run to run only with a workspace per stream. So each stream's own is set after it.
    check_cublas(cublasSetStream(handle, launch_stream(device)), "cublasSetStream", g);
    const Tensor workspace = gemm_workspace(device);
    check_cublas(
        cublasSetWorkspace(handle, workspace.raw_data(), static_cast<size_t>(kGemmWorkspaceBytes)),
        "cublasSetWorkspace", g);
    handle_ = handle;
  }
  cublasHandle_t get() const { return handle_; }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  std::unique_lock<std::mutex> lock_;
  cublasHandle_t handle_ = nullptr;
};

// One operand as stored row-major: `rows` x `cols` with leading dimension `ld`, `batch` matrices
// `stride` apart. The furthest element cuBLAS will touch must lie inside the tensor's storage
// (on a GPU, a read past it would be an illegal address, not an error message).
void check_extent(const char* name, const Tensor& t, int64_t rows, int64_t cols, int64_t ld,
                  int64_t stride, const GemmArgs& g) {
  GLASS_CHECK(stride >= 0, "gemm: the batch stride of {} is negative in {}", name,
              describe_gemm_args(g));
  if (rows == 0 || cols == 0) return;
  const int64_t last = t.offset() + (g.batch - 1) * stride + (rows - 1) * ld + cols - 1;
  const int64_t capacity = static_cast<int64_t>(t.storage()->nbytes / dtype_size(t.dtype()));
  GLASS_CHECK(last < capacity,
              "gemm: {} ({} x {} as stored) reaches element {} beyond its storage of {} elements "
              "in {}",
              name, rows, cols, last, capacity, describe_gemm_args(g));
}

}  // namespace

void check_gemm_args(const GemmArgs& g) {
  GLASS_CHECK(g.a.defined() && g.b.defined() && g.c.defined(),
              "gemm: an operand is undefined in {}", describe_gemm_args(g));
  const Device device = g.c.device();
  const DType dtype = g.c.dtype();
  for (const Tensor* t : {&g.a, &g.b, &g.c, &g.bias})
    GLASS_CHECK(!t->defined() || ((dtype == DType::f32 || dtype == DType::bf16) &&
                                  t->dtype() == dtype && t->device() == device),
                "gemm: every operand must be f32, or every one bf16 (f64 is for cpu), on C's "
                "device {} in {}",
                device.str(), describe_gemm_args(g));
  // cuBLAS takes int sizes and leading dimensions; the leading dimensions' lower bounds are its
  // own check.
  for (int64_t v : {g.m, g.n, g.k, g.batch, g.lda, g.ldb, g.ldc})
    GLASS_CHECK(v <= INT_MAX, "gemm: {} exceeds cuBLAS's int range in {}", v,
                describe_gemm_args(g));
  GLASS_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1, "gemm: bad sizes in {}",
              describe_gemm_args(g));
  // A is stored m x k, or k x m when transposed; B is k x n, or n x k.
  check_extent("A", g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.stride_a, g);
  check_extent("B", g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.stride_b, g);
  check_extent("C", g.c, g.m, g.n, g.ldc, g.stride_c, g);
  GLASS_CHECK(g.batch == 1 || g.m == 0 || g.stride_c >= g.m * g.ldc,
              "gemm: C's batch stride makes the outputs overlap in {}", describe_gemm_args(g));
  if (g.bias.defined())
    GLASS_CHECK(g.bias.is_contiguous() && g.bias.numel() == g.n,
                "gemm: bias must be contiguous with n values in {}", describe_gemm_args(g));
}

namespace {

cublasOperation_t op(bool transposed) { return transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

void gemm(const GemmArgs& g) {
  check_gemm_args(g);
  if (g.m == 0 || g.n == 0) return;
  // A bias is cuBLASLt's BIAS epilogue, and TF32 is a cuBLASLt compute type (gemm_lt.cu).
  if (g.bias.defined() || tf32_enabled()) return gemm_lt(g, GemmEpilogue{});
  gemm_cublas(g);
}

void gemm_cublas(const GemmArgs& g) {
  GLASS_CHECK(!g.bias.defined(), "gemm_cublas: cuBLAS adds no bias ({})", describe_gemm_args(g));
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  const GemmElements e = gemm_elements(g);  // no bias here
  const bool bf16 = g.c.dtype() == DType::bf16;
  LaunchInfo info;
  info.kernel = bf16 ? "cublasGemmStridedBatchedEx" : "cublasSgemmStridedBatched";
  info.device = g.c.device();
  info.flops = gemm_flops(g);
  info.bytes = static_cast<double>(dtype_size(g.c.dtype())) * (e.a + e.b + e.c);
  // bf16: cuBLAS's tensor-core kernels; f32: cuBLAS's default math mode, no TF32 (CUDA cores).
  info.unit = bf16 ? ComputeUnit::tensor_core_bf16 : ComputeUnit::cuda_core;
  info.stream = launch_stream_id(info.device);
  info.native_stream = launch_stream(info.device);
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  // Column-major C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m): B first, m and n swapped.
  const int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);
  {
    const LockedHandle handle(g.c.device(), g);
    glass::launch(info, [&] {
      if (bf16)  // bf16 in and out, f32 alpha, beta and accumulation
        status = cublasGemmStridedBatchedEx(
            handle.get(), op(g.trans_b), op(g.trans_a), m, n, k, &alpha, g.b.raw_data(),
            CUDA_R_16BF, static_cast<int>(g.ldb), g.stride_b, g.a.raw_data(), CUDA_R_16BF,
            static_cast<int>(g.lda), g.stride_a, &beta, g.c.raw_data(), CUDA_R_16BF,
            static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch), CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT);
      else
        status = cublasSgemmStridedBatched(
            handle.get(), op(g.trans_b), op(g.trans_a), m, n, k, &alpha, g.b.data<float>(),
            static_cast<int>(g.ldb), g.stride_b, g.a.data<float>(), static_cast<int>(g.lda),
            g.stride_a, &beta, g.c.data<float>(), static_cast<int>(g.ldc), g.stride_c,
            static_cast<int>(g.batch));
    });
  }
  check_cublas(status, info.kernel, g);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
