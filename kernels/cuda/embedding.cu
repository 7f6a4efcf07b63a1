// cuda embedding: gather rows of a table by token id (forward), and the scatter-add of the output
// gradient back into table rows (backward). Contracts in kernels/backend.h; the cpu reference is
// kernels/cpu/embedding.cpp.
//
// Bad ids: the ids live in device memory, so the host cannot check them before the launch without
// waiting for the device. The kernels check them instead: a thread that meets an id outside
// [0, V) skips it (no read or write out of bounds) and raises a device error flag with its
// position (kernels/cuda/common.h). The flag is read with the next host read of the device (the
// step's loss, an item()), which throws naming the kernel, the first bad position and its value.
// The output is then incomplete, as the call failed.
//
// The backward is deterministic without float atomics, and parallel over tokens and channels:
//   1. rank:  every position finds its slot in the ids sorted by (id, position), a stable sort
//             computed by counting (slot = #ids smaller + #equal ids before it), tile by tile
//             through shared memory; bad ids sort last and are skipped;
//   2. zero:  dtable = 0 (rows no token uses stay 0);
//   3. rows:  one warp per sorted slot that starts a run of equal ids: the warp sums the dout rows
//             of the run in ascending position order (lane l takes channels l, l + 32, ...) and
//             writes the table row once.
// Every row is summed in the order a serial loop (and the cpu kernel) sums it, so the result is
// bit-identical to cpu's. Ranking costs N^2 / 2 comparisons spread over N threads: for GPT-2's
// 8192 tokens a few tens of microseconds, far below the rows pass it orders.
// Tables are f32 or bf16 (f64 is for gradcheck on cpu): the rows pass sums in f32 and rounds each
// table element once.
#include <algorithm>
#include <climits>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGridY = 65535;
constexpr int kRankThreads = 256;  // positions ranked per block, and ids per shared tile
constexpr int kWarpsPerBlock = 8;  // runs of the rows pass per block

// The operands' geometry; ids themselves are checked on the device.
void check_embedding(const char* kernel, const Tensor& ids, const Tensor& table,
                     const Tensor& rows) {
  GLASS_CHECK(ids.dtype() == DType::i32 && ids.is_contiguous() && ids.numel() < INT_MAX,
              "{}: ids {} must be contiguous i32 (fewer than 2^31 of them)", kernel,
              ids.describe());
  GLASS_CHECK(table.dim() == 2 && (table.dtype() == DType::f32 || table.dtype() == DType::bf16) &&
                  table.is_contiguous() && rows.dtype() == table.dtype() && rows.is_contiguous() &&
                  rows.numel() == ids.numel() * table.size(1),
              "{}: table {} must be contiguous f32 or bf16 [V, C] and rows {} contiguous [{}, C] "
              "of the table's dtype",
              kernel, table.describe(), rows.describe(), ids.numel());
  GLASS_CHECK(ids.device() == table.device() && rows.device() == table.device(),
              "{}: ids {}, table {} and rows {} must be on one device", kernel, ids.describe(),
              table.describe(), rows.describe());
}

// A flag for the bad ids of this call; a raised one throws naming position and value.
Tensor bad_id_flag(const char* kernel, const Tensor& ids, const Tensor& table) {
  return deferred_flag(
      ids, [kernel, ids, vocab = table.size(0), table_desc = table.describe()](int64_t position) {
        return fmt::format("{}: id {} at position {} is outside the table's rows [0, {}) of {}",
                           kernel, read_i32_at(ids, position), position, vocab, table_desc);
      });
}

// out[i] = table[ids[i]]. Thread mapping: block row blockIdx.y takes tokens blockIdx.y,
// blockIdx.y + gridDim.y, ...; for each, the threads of block column blockIdx.x copy consecutive
// channels, so a warp reads 32 consecutive values of one table row and writes them to one out row
// (coalesced). Thread 0 of the grid's column 0 raises the flag for a bad id; every thread skips it.
template <class T>
__global__ void embedding_forward_kernel(const int* ids, const T* table, T* out, int64_t n,
                                         int64_t vocab, int64_t channels, int* bad_id) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
    const int id = ids[i];
    const bool valid = id >= 0 && id < vocab;
    if (!valid && c == 0) raise_flag(bad_id, i);
    if (valid && c < channels) out[i * channels + c] = table[id * channels + c];
  }
}

// Backward 1: slot[i] = the rank of (key_i, i) among all (key_j, j), key = the id, or vocab for a
// bad one (sorted last, flagged). sorted_ids[slot] and sorted_pos[slot] receive the key and i.
// Each block ranks kRankThreads positions; the ids pass through shared memory a tile at a time.
__global__ void embedding_rank_kernel(const int* ids, int64_t n, int64_t vocab, int* sorted_ids,
                                      int* sorted_pos, int* bad_id) {
  __shared__ int tile[kRankThreads];
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int key = static_cast<int>(vocab);
  if (i < n) {
    const int id = ids[i];
    if (id >= 0 && id < vocab)
      key = id;
    else
      raise_flag(bad_id, i);
  }
  int64_t slot = 0;
  for (int64_t start = 0; start < n; start += kRankThreads) {
    // 1. a tile of keys into shared memory (past the end: never counted)
    const int64_t j = start + threadIdx.x;
    int kj = static_cast<int>(vocab);
    if (j < n) kj = ids[j] >= 0 && ids[j] < vocab ? ids[j] : static_cast<int>(vocab);
    tile[threadIdx.x] = kj;
    __syncthreads();
    // 2. count the keys that sort before this one: smaller, or equal at an earlier position
    const int64_t len = n - start < kRankThreads ? n - start : kRankThreads;
    for (int64_t t = 0; t < len; ++t) {
      const int other = tile[t];
      slot += other < key || (other == key && start + t < i);
    }
    __syncthreads();  // the tile is overwritten next round
  }
  if (i < n) {
    sorted_ids[slot] = key;
    sorted_pos[slot] = static_cast<int>(i);
  }
}

// Backward 3: warp w of block b takes slot k = b * kWarpsPerBlock + w. When k starts a run of
// equal (valid) ids, the warp sums dout rows sorted_pos[k], sorted_pos[k + 1], ... of the run, in
// that (ascending position) order, lane l over channels l, l + 32, ..., and writes the table row.
template <class T>
__global__ void embedding_backward_kernel(const int* sorted_ids, const int* sorted_pos,
                                          const T* dout, T* dtable, int64_t n, int64_t vocab,
                                          int64_t channels) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (k >= n) return;
  const int id = sorted_ids[k];
  if (id >= vocab || (k > 0 && sorted_ids[k - 1] == id)) return;  // bad, or not a run's start
  int64_t end = k + 1;
  while (end < n && sorted_ids[end] == id) ++end;
  T* row = dtable + static_cast<int64_t>(id) * channels;
  for (int64_t c = lane; c < channels; c += 32) {
    float acc = 0.0f;
    for (int64_t p = k; p < end; ++p)
      acc += to_compute(dout[static_cast<int64_t>(sorted_pos[p]) * channels + c]);
    row[c] = from_compute<T>(acc);
  }
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) {
  check_embedding("embedding_forward", ids, table, out);
  const int64_t n = ids.numel(), vocab = table.size(0), channels = table.size(1);
  if (n == 0 || channels == 0) return;  // nothing to gather (nor any id to check)
  const Tensor bad_id = bad_id_flag("embedding_forward", ids, table);
  const dim3 block(whole_warps(channels, kMaxThreads));
  const dim3 grid(ceil_div(channels, block.x), static_cast<unsigned>(std::min(n, kMaxGridY)));
  // Reads the ids and n table rows, writes n rows.
  visit_f32_bf16(table, "embedding_forward", [&]<class T>() {
    const LaunchInfo info =
        kernel_launch_info("embedding_forward", table, grid, block, 0, 0,
                           static_cast<double>(ids.nbytes()) +
                               2.0 * static_cast<double>(n * channels * dtype_size(table.dtype())));
    launch_cuda_kernel(info, embedding_forward_kernel<T>, ids.data<int32_t>(), table.data<T>(),
                       out.data<T>(), n, vocab, channels, bad_id.data<int32_t>());
  });
}

void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable) {
  check_embedding("embedding_backward", ids, dtable, dout);
  const int64_t n = ids.numel(), vocab = dtable.size(0), channels = dtable.size(1);
  if (channels == 0) return;  // nothing to write
  // 2. (launched first: independent of the sort) rows no token uses stay 0
  fill(dtable, 0.0);
  if (n == 0) return;
  const Tensor bad_id = bad_id_flag("embedding_backward", ids, dtable);
  // 1. the stable sort of the positions by id
  const Tensor sorted_ids = Tensor::empty({n}, DType::i32, ids.device());
  const Tensor sorted_pos = Tensor::empty({n}, DType::i32, ids.device());
  const double dn = static_cast<double>(n);
  launch_cuda_kernel(kernel_launch_info("embedding_rank", ids, dim3(ceil_div(n, kRankThreads)),
                                        dim3(kRankThreads), 0, dn * dn, 4.0 * 3.0 * dn),
                     embedding_rank_kernel, ids.data<int32_t>(), n, vocab,
                     sorted_ids.data<int32_t>(), sorted_pos.data<int32_t>(),
                     bad_id.data<int32_t>());
  // 3. one warp per run of equal ids: one add per element of dout; reads dout and the sorted
  //    ids, writes the used rows
  const double es = static_cast<double>(dtype_size(dtable.dtype()));
  visit_f32_bf16(dtable, "embedding_backward", [&]<class T>() {
    launch_cuda_kernel(
        kernel_launch_info("embedding_backward", dtable, dim3(ceil_div(n, kWarpsPerBlock)),
                           dim3(32 * kWarpsPerBlock), 0, dn * static_cast<double>(channels),
                           8.0 * dn + 2.0 * es * dn * static_cast<double>(channels)),
        embedding_backward_kernel<T>, sorted_ids.data<int32_t>(), sorted_pos.data<int32_t>(),
        dout.data<T>(), dtable.data<T>(), n, vocab, channels);
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
