// CUDA reductions with their host launchers: sum over one dimension, and the sum of squares for
// global-norm clipping.
//
// Determinism: no atomics. Each thread sums a set of elements fixed by the launch shape (which
// depends only on the tensor's shape), in order, into a double; the threads' sums are then
// combined by a tree whose pairing is fixed (shared memory, or warp shuffles in a fixed
// butterfly). So results are bit-identical run to run, and double accumulation keeps long f32
// sums accurate, bf16 inputs included (as on cpu, though the order of additions differs, so cpu and
// emu agree to rounding, not bit for bit).
#include <algorithm>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/multi_tensor.h"
#include "kernels/reduce_checks.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr unsigned kThreads = 256;            // threads per block, a multiple of the warp size
constexpr unsigned kMaxPartialBlocks = 1024;  // blocks of the first sum_squares pass, at most
constexpr int64_t kMinPerThread = 8;          // elements each thread of that pass sums, at least

// --- sum_dim: x viewed as [outer, n, inner] (contiguous), out[o, c] = sum_r x[o, r, c].
// A block owns a chunk of bx consecutive columns of one o and a range of rows (blockIdx.y: the
// split), and has bx x by threads (bx * by = 256): thread (tx, ty) sums rows ty, ty + by, ... of
// the range in column tx. A warp then reads bx consecutive columns of 32 / bx consecutive rows:
// coalesced both for wide rows (bx = 32) and for row sums (inner = 1, bx = 1, where rows are
// consecutive in memory). The by partial sums of a column are then added by a tree over ty in
// shared memory, the pairing fixed by by.
// Grid: outer * ceil(inner / bx) blocks in x (x allows 2^31 - 1 blocks; y only 65535), and in y
// the splits of the rows. Bias gradients are few columns over many rows ([8192, 768]: 24 column
// chunks), so the rows are split until the grid covers the GPU (kTargetBlocks); each split writes
// its column sums (double) to a partial row, and a second kernel adds the partial rows in split
// order. Both orders are fixed by the shape, so results are bit-identical run to run.

constexpr unsigned kTargetBlocks = 2 * 132;  // two blocks per SM of an H200
constexpr int64_t kMinRowsPerSplit = 64;     // below this a split costs more than it gains

template <class T, class Out>
__global__ void sum_dim_kernel(const T* x, Out* out, int64_t n, int64_t inner, unsigned col_chunks,
                               int64_t rows_per_split, int64_t split_stride) {
  __shared__ double partial[kThreads];
  const int64_t o = blockIdx.x / col_chunks;
  const int64_t col = static_cast<int64_t>(blockIdx.x % col_chunks) * blockDim.x + threadIdx.x;
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * rows_per_split;
  const int64_t end = first + rows_per_split < n ? first + rows_per_split : n;
  // 1. This thread's rows of its column, in order (columns past the end sum nothing).
  double acc = 0;
  if (col < inner) {
    const T* src = x + o * n * inner + col;
    for (int64_t r = first + threadIdx.y; r < end; r += blockDim.y)
      acc += static_cast<double>(to_compute(src[r * inner]));
  }
  partial[t] = acc;
  // 2. Tree over ty: rows [0, s) add rows [s, 2s), halving s. The barrier before each step
  //    makes the previous step's sums visible.
  for (unsigned s = blockDim.y / 2; s > 0; s /= 2) {
    __syncthreads();
    if (threadIdx.y < s) partial[t] += partial[t + s * blockDim.x];
  }
  // 3. Row 0 holds each column's total (written by this same thread: no barrier needed), for
  //    this split.
  if (threadIdx.y == 0 && col < inner)
    out[blockIdx.y * split_stride + o * inner + col] =
        from_compute<Out>(static_cast<compute_t<Out>>(partial[t]));
}

// Second stage: out[i] = the sum of the splits' partials of column i, in split order.
template <class T>
__global__ void sum_dim_combine_kernel(const double* partials, T* out, int64_t count,
                                       int64_t splits) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  double acc = 0;
  for (int64_t s = 0; s < splits; ++s) acc += partials[s * count + i];
  out[i] = from_compute<T>(static_cast<compute_t<T>>(acc));
}

// --- sum_squares, pass 1: a multi-tensor launch (kernels/cuda/multi_tensor.h). Block (b, y)
// sums x_y[i]^2 over i = b*256 + t + k * (gridDim.x * 256), k >= 0 (grid-stride: each step of a
// warp reads 32 consecutive elements) into partials[y * gridDim.x + b] (double). The grid depends
// only on the tensors' sizes, so the partition, and the result, are fixed.

template <class T>
struct SquaresTensorList {
  const T* x[kMaxTensorsPerLaunch];
  int64_t n[kMaxTensorsPerLaunch];
};

template <class T>
__global__ void sum_squares_kernel(SquaresTensorList<T> list, double* partials) {
  const T* x = list.x[blockIdx.y];
  const int64_t n = list.n[blockIdx.y];
  double acc = 0;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const double v = static_cast<double>(to_compute(x[i]));
    acc += v * v;
  }
  const double total = block_reduce(acc, Sum{});
  if (threadIdx.x == 0) partials[blockIdx.y * gridDim.x + blockIdx.x] = total;
}

// --- sum_squares, pass 2: one block adds the partials (thread t: partials t, t + 256, ...),
// then block_reduce; thread 0 stores the total in the output's type.

template <class Out>
__global__ void sum_squares_combine_kernel(const double* partials, int64_t count, Out* out) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  const double total = block_reduce(acc, Sum{});
  if (threadIdx.x == 0) out[0] = static_cast<Out>(total);
}

}  // namespace

void sum_dim(const Tensor& x, const Tensor& out, int dim) {
  const SumDimShape shape = check_sum_dim(x, out, dim);
  const int64_t outer = shape.outer, n = shape.n, inner = shape.inner;
  if (outer * inner == 0) return;
  // Columns per block: 32 when rows are wide, else inner rounded up to a power of two.
  unsigned bx = 1;
  while (bx < 32 && bx < inner) bx *= 2;
  const dim3 block(bx, kThreads / bx);
  const unsigned col_chunks = ceil_div(inner, bx);
  const unsigned blocks = static_cast<unsigned>(outer) * col_chunks;
  // Splits of the rows: enough to cover the GPU, each at least kMinRowsPerSplit rows.
  int64_t splits = 1;
  if (blocks < kTargetBlocks)
    splits = std::min<int64_t>(ceil_div(kTargetBlocks, blocks), ceil_div(n, kMinRowsPerSplit));
  splits = std::max<int64_t>(splits, 1);
  const int64_t rows_per_split = (n + splits - 1) / splits;
  splits = n > 0 ? (n + rows_per_split - 1) / rows_per_split : 1;
  const int64_t count = outer * inner;
  const LaunchInfo info = kernel_launch_info(
      "sum_dim", x, dim3(blocks, static_cast<unsigned>(splits)), block, 0,
      static_cast<double>(x.numel()),
      static_cast<double>(x.nbytes()) +
          (splits > 1 ? 8.0 * static_cast<double>(splits * count) : double(out.nbytes())));
  visit_element(x, "sum_dim", [&]<class T>() {
    if (splits == 1) {
      launch_cuda_kernel(info, sum_dim_kernel<T, T>, x.data<T>(), out.data<T>(), n, inner,
                         col_chunks, rows_per_split, int64_t{0});
      return;
    }
    // 1. each split's column sums; 2. the splits added in order
    const Tensor partials = Tensor::empty({splits, count}, DType::f64, x.device());
    launch_cuda_kernel(info, sum_dim_kernel<T, double>, x.data<T>(), partials.data<double>(), n,
                       inner, col_chunks, rows_per_split, count);
    launch_cuda_kernel(kernel_launch_info("sum_dim_combine", x, dim3(ceil_div(count, kThreads)),
                                          dim3(kThreads), 0, static_cast<double>(splits * count),
                                          static_cast<double>(partials.nbytes() + out.nbytes())),
                       sum_dim_combine_kernel<T>, partials.data<double>(), out.data<T>(), count,
                       splits);
  });
}

void sum_squares(std::span<const Tensor> xs, const Tensor& out) {
  check_sum_squares(xs, out);
  // Plan the pass-1 launches (runs of one dtype) and where each one's partials go.
  struct Batch {
    size_t first, count;
    unsigned blocks;  // per tensor
    int64_t offset;   // of its first partial
  };
  std::vector<Batch> batches;
  int64_t partial_count = 0;
  for_each_launch(
      xs.size(), [&](size_t a, size_t b) { return xs[a].dtype() == xs[b].dtype(); },
      [&](size_t first, size_t count) {
        int64_t largest = 0;
        for (size_t k = first; k < first + count; ++k) largest = std::max(largest, xs[k].numel());
        const unsigned blocks =
            multi_tensor_blocks(largest, kThreads, kMinPerThread, kMaxPartialBlocks);
        batches.push_back({first, count, blocks, partial_count});
        partial_count += static_cast<int64_t>(blocks) * static_cast<int64_t>(count);
      });
  Tensor partials = Tensor::empty({std::max<int64_t>(partial_count, 1)}, DType::f64, out.device());
  if (partial_count == 0) fill(partials, 0.0);  // no tensors: the sum is 0
  // Pass 1: per-block partial sums of squares, tensor by tensor.
  for (const Batch& batch : batches) {
    const Tensor& head = xs[batch.first];
    visit_element(head, "sum_squares", [&]<class T>() {
      SquaresTensorList<T> list{};
      double n = 0, bytes = 0;
      for (size_t k = 0; k < batch.count; ++k) {
        const Tensor& x = xs[batch.first + k];
        list.x[k] = x.data<T>();
        list.n[k] = x.numel();
        n += static_cast<double>(x.numel());
        bytes += static_cast<double>(x.nbytes());
      }
      const dim3 grid(batch.blocks, static_cast<unsigned>(batch.count));
      launch_cuda_kernel(kernel_launch_info("sum_squares", head, grid, dim3(kThreads), 0, 2.0 * n,
                                            bytes + 8.0 * batch.blocks * batch.count),
                         sum_squares_kernel<T>, list, partials.data<double>() + batch.offset);
    });
  }
  // Pass 2: one block adds all partials in a fixed order.
  const int64_t count = std::max<int64_t>(partial_count, 1);
  visit_float(out, "sum_squares", [&]<class Out>() {
    launch_cuda_kernel(kernel_launch_info("sum_squares_combine", out, dim3(1), dim3(kThreads), 0,
                                          static_cast<double>(count),
                                          static_cast<double>(partials.nbytes() + out.nbytes())),
                       sum_squares_combine_kernel<Out>, partials.data<double>(), count,
                       out.data<Out>());
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
