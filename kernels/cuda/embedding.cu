// cuda embedding: gather rows of a table by token id (forward), and the scatter-add of the output
// gradient back into table rows (backward). Contracts in kernels/kernel_list.inc; the cpu reference
// is kernels/cpu/embedding.cpp.
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
//   3. rows:  each run of equal ids cut into segments of kSegmentSlots slots; one warp per
//             segment sums its dout rows in ascending position order (lane l takes channels, or
//             16-byte vectors, l, l + 32, ...); a segment that is a whole run writes its table
//             row, the others their f32 sums;
//   4. combine: one warp per run longer than a segment adds its segments' sums in order and
//             writes the table row once.
// A run of up to kSegmentSlots occurrences is summed in the order a serial loop (and the cpu
// kernel) sums it, so its row is bit-identical to cpu's; a longer one (a frequent token) is summed
// in segments, then the segments in order: another fixed order, the same bits every run, within
// f32 rounding of cpu's. Ranking costs N^2 / 2 comparisons spread over N threads: for GPT-2's
// 8192 tokens a few tens of microseconds, far below the rows pass it orders.
// Tables are f32 or bf16 (f64 is for gradcheck on cpu): the rows pass sums in f32 and rounds each
// table element once.
#include <algorithm>
#include <climits>

#include "kernels/costs/embedding.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"
#include "kernels/cuda/vector_row.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGridY = 65535;
constexpr int kRankThreads = 256;      // positions ranked per block, and ids per shared tile
constexpr int kWarpsPerBlock = 8;      // slots of the rows pass (and of the combine) per block
constexpr int64_t kSegmentSlots = 32;  // the most slots (occurrences) one warp sums serially

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
// units of the row (vector_row.h: 16-byte vectors when `vectorised`, i.e. the rows are whole
// vectors and both arrays 16-byte aligned; else single channels), so a warp reads consecutive
// values of one table row and writes them to one out row (coalesced). Thread 0 of the grid's
// column 0 raises the flag for a bad id; every thread skips it.
template <class T>
__global__ void embedding_forward_kernel(const int* ids, const T* table, T* out, int64_t n,
                                         int64_t vocab, int64_t channels, bool vectorised,
                                         int* bad_id) {
  const int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t units = vec_units<T>(channels, vectorised);
  for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
    const int id = ids[i];
    const bool valid = id >= 0 && id < vocab;
    if (!valid && u == 0) raise_flag(bad_id, i);
    if (!valid || u >= units) continue;
    const T* src = table + id * channels;
    T* dst = out + i * channels;
    visit_unit<T>(
        vectorised, u, channels, [&](int64_t c) { store_vec(dst + c, load_vec(src + c)); },
        [&](int64_t c) { dst[c] = src[c]; });
  }
}

// Backward 1: slot[i] = the rank of (key_i, i) among all (key_j, j), key = the id, or vocab for a
// bad one (sorted last, flagged). sorted_ids[slot] and sorted_pos[slot] receive the key and i,
// run_starts[slot] the first slot of the key's run (the number of smaller keys).
// Each block ranks kRankThreads positions; the ids pass through shared memory a tile at a time.
__global__ void embedding_rank_kernel(const int* ids, int64_t n, int64_t vocab, int* sorted_ids,
                                      int* sorted_pos, int* run_starts, int* bad_id) {
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
  int64_t smaller = 0, equal_before = 0;
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
      smaller += other < key;
      equal_before += other == key && start + t < i;
    }
    __syncthreads();  // the tile is overwritten next round
  }
  if (i < n) {
    const int64_t slot = smaller + equal_before;
    sorted_ids[slot] = key;
    sorted_pos[slot] = static_cast<int>(i);
    run_starts[slot] = static_cast<int>(smaller);  // the first slot of this id's run
  }
}

// Backward 3 and 4: the rows pass. A run of equal ids is cut into segments of kSegmentSlots
// slots counted from the run's first slot, so a frequent token's run (GPT-2: ~10^3 occurrences of
// the most common token among 8192) is summed by many warps at once instead of one warp serially,
// while a run of at most kSegmentSlots is one segment, summed in the cpu kernel's order. A segment
// that is a whole run writes its table row; the segments of a longer run write their f32 sums to
// seg_partial, and the combine kernel adds a run's segments in order. Where a segment starting at
// slot k writes: seg_partial[k / kSegmentSlots][k is the run's first slot ? 1 : 0]. No two
// segments of long runs share a place: within one chunk of kSegmentSlots slots, a segment that
// starts a long run outlasts the chunk, and one that continues a run began in an earlier chunk
// (its run covers the kSegmentSlots slots before it), so a chunk holds at most one of each.

// The sum over slots [from, to) of the dout rows, in slot (= ascending position) order, for the
// channels of `lane`: units lane, lane + 32, ... (16-byte vectors when `vectorised`: channels a
// multiple of the width and dout 16-byte aligned). emit(c, acc, width) receives each unit's sums.
template <class T, class Emit>
__device__ void sum_dout_rows(const int* sorted_pos, int64_t from, int64_t to, const T* dout,
                              int64_t channels, bool vectorised, int lane, Emit emit) {
  constexpr int W = kVecWidth<T>;
  const int width = vectorised ? W : 1;
  for (int64_t c = static_cast<int64_t>(lane) * width; c < channels; c += 32 * width) {
    float acc[W] = {};
    for (int64_t p = from; p < to; ++p) {
      const T* src = dout + static_cast<int64_t>(sorted_pos[p]) * channels + c;
      if (vectorised) {
        const Vec<T> q = load_vec(src);
        for (int k = 0; k < W; ++k) acc[k] += to_compute(q.v[k]);
      } else {
        acc[0] += to_compute(*src);
      }
    }
    emit(c, acc, width);
  }
}

// Where the segment starting at slot k (of a run starting at run_start) keeps its sums.
__device__ inline int64_t segment_index(int64_t k, int64_t run_start) {
  return (k / kSegmentSlots) * 2 + (k == run_start ? 1 : 0);
}

// Backward 3: warp w of block b takes slot k = b * kWarpsPerBlock + w. When k starts a segment
// (k - the run's first slot is a multiple of kSegmentSlots), the warp sums its slots.
template <class T>
__global__ void embedding_backward_kernel(const int* sorted_ids, const int* sorted_pos,
                                          const int* run_starts, const T* dout, T* dtable,
                                          float* seg_partial, int64_t n, int64_t vocab,
                                          int64_t channels, bool vectorised) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (k >= n) return;
  const int id = sorted_ids[k];
  const int64_t run_start = run_starts[k];
  if (id >= vocab || (k - run_start) % kSegmentSlots != 0) return;  // bad, or inside a segment
  int64_t end = k + 1;
  while (end < n && end < k + kSegmentSlots && sorted_ids[end] == id) ++end;
  const bool whole_run = k == run_start && (end == n || sorted_ids[end] != id);
  if (whole_run) {
    T* row = dtable + static_cast<int64_t>(id) * channels;
    sum_dout_rows(sorted_pos, k, end, dout, channels, vectorised, lane,
                  [&](int64_t c, const float* acc, int width) {
                    if (width == 1) {
                      row[c] = from_compute<T>(acc[0]);
                      return;
                    }
                    Vec<T> o;
                    for (int i = 0; i < kVecWidth<T>; ++i) o.v[i] = from_compute<T>(acc[i]);
                    store_vec(row + c, o);
                  });
    return;
  }
  float* out = seg_partial + segment_index(k, run_start) * channels;
  sum_dout_rows(sorted_pos, k, end, dout, channels, vectorised, lane,
                [&](int64_t c, const float* acc, int width) {
                  for (int i = 0; i < width; ++i) out[c + i] = acc[i];
                });
}

// Backward 4: warp w of block b takes slot k as above. When k starts a run longer than
// kSegmentSlots, the warp adds the run's segment sums in order (lane l over channels l, l + 32,
// ...) and writes the table row, rounded once.
template <class T>
__global__ void embedding_backward_combine_kernel(const int* sorted_ids, const int* run_starts,
                                                  const float* seg_partial, T* dtable, int64_t n,
                                                  int64_t vocab, int64_t channels) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (k >= n) return;
  const int id = sorted_ids[k];
  if (id >= vocab || run_starts[k] != k) return;  // bad, or not a run's start
  if (k + kSegmentSlots >= n || sorted_ids[k + kSegmentSlots] != id) return;  // one segment
  T* row = dtable + static_cast<int64_t>(id) * channels;
  for (int64_t c = lane; c < channels; c += 32) {
    float acc = 0.0f;
    for (int64_t seg = k; seg < n && sorted_ids[seg] == id; seg += kSegmentSlots)
      acc += seg_partial[segment_index(seg, k) * channels + c];
    row[c] = from_compute<T>(acc);
  }
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) {
  check_embedding("embedding_forward", ids, table, out);
  const int64_t n = ids.numel(), vocab = table.size(0), channels = table.size(1);
  if (n == 0 || channels == 0) return;  // nothing to gather (nor any id to check)
  const Tensor bad_id = bad_id_flag("embedding_forward", ids, table);
  visit_f32_bf16(table, "embedding_forward", [&]<class T>() {
    const bool vectorised =
        channels % kVecWidth<T> == 0 && all_vec_aligned(table.data<T>(), out.data<T>());
    const int64_t units = vec_units<T>(channels, vectorised);
    const dim3 block(whole_warps(units, kMaxThreads));
    const dim3 grid(ceil_div(units, block.x), static_cast<unsigned>(std::min(n, kMaxGridY)));
    const LaunchCost cost = embedding_forward_cost(ids, out);
    const LaunchInfo info =
        kernel_launch_info("embedding_forward", table, grid, block, 0, cost.flops, cost.bytes);
    launch_cuda_kernel(info, embedding_forward_kernel<T>, ids.data<int32_t>(), table.data<T>(),
                       out.data<T>(), n, vocab, channels, vectorised, bad_id.data<int32_t>());
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
  const Tensor run_starts = Tensor::empty({n}, DType::i32, ids.device());
  const double dn = static_cast<double>(n);
  launch_cuda_kernel(kernel_launch_info("embedding_rank", ids, dim3(ceil_div(n, kRankThreads)),
                                        dim3(kRankThreads), 0, dn * dn, 4.0 * 4.0 * dn),
                     embedding_rank_kernel, ids.data<int32_t>(), n, vocab,
                     sorted_ids.data<int32_t>(), sorted_pos.data<int32_t>(),
                     run_starts.data<int32_t>(), bad_id.data<int32_t>());
  // 3. one warp per segment (up to kSegmentSlots slots of a run): one add per element of dout;
  //    reads dout and the sorted ids, writes the rows of whole runs and the segments' sums
  // 4. one warp per run longer than a segment: its segments' sums added in order
  const double es = static_cast<double>(dtype_size(dtable.dtype()));
  const int64_t chunks = (n + kSegmentSlots - 1) / kSegmentSlots;
  const Tensor seg_partial = Tensor::empty({chunks, 2, channels}, DType::f32, ids.device());
  visit_f32_bf16(dtable, "embedding_backward", [&]<class T>() {
    const bool vectorised =
        channels % kVecWidth<T> == 0 && all_vec_aligned(dout.data<T>(), dtable.data<T>());
    launch_cuda_kernel(
        kernel_launch_info("embedding_backward", dtable, dim3(ceil_div(n, kWarpsPerBlock)),
                           dim3(32 * kWarpsPerBlock), 0, dn * static_cast<double>(channels),
                           8.0 * dn + 2.0 * es * dn * static_cast<double>(channels)),
        embedding_backward_kernel<T>, sorted_ids.data<int32_t>(), sorted_pos.data<int32_t>(),
        run_starts.data<int32_t>(), dout.data<T>(), dtable.data<T>(), seg_partial.data<float>(), n,
        vocab, channels, vectorised);
    launch_cuda_kernel(
        kernel_launch_info("embedding_backward_combine", dtable, dim3(ceil_div(n, kWarpsPerBlock)),
                           dim3(32 * kWarpsPerBlock), 0, static_cast<double>(chunks * channels),
                           4.0 * dn + 4.0 * static_cast<double>(seg_partial.numel())),
        embedding_backward_combine_kernel<T>, sorted_ids.data<int32_t>(),
        run_starts.data<int32_t>(), seg_partial.data<float>(), dtable.data<T>(), n, vocab,
        channels);
  });
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
