// cuda embedding: gather rows of a table by token id (forward), and the scatter-add of the output
// gradient back into table rows (backward). Contracts in kernels/backend.h; the cpu reference is
// kernels/cpu/embedding.cpp.
//
// Bad ids: the ids live in device memory, so the host cannot check them before the launch without
// a copy. The kernels check them instead: a thread that meets an id outside [0, V) skips it (no
// read or write out of bounds) and records its position in a one-int flag with atomicMin, so the
// first bad position wins whatever order the threads ran in. After the launch the launcher copies
// the flag to the host (a synchronising 4-byte copy on `cuda`, a read on `emu`) and, when it is
// set, copies that one id too and throws naming the position and the value. The output is then
// incomplete, as the call failed.
//
// The backward is deterministic without float atomics: thread c owns column c of the table
// gradient and walks the tokens in order, adding dout[i][c] into dtable[ids[i]][c]. No two threads
// touch one element, and every row is summed in ascending position order, as a serial loop (and
// the cpu kernel) sums it. Tables are f32 or bf16 (f64 is for gradcheck on cpu); a bf16 table
// gradient is summed in an f32 scratch table and rounded once into bf16 by the cast kernel.
#include <algorithm>
#include <climits>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_launcher.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxGridY = 65535;
constexpr int kNoBadId = INT_MAX;

// A block of whole warps wide enough for a row of `channels`, at most kMaxThreads.
unsigned threads_for(int64_t channels) {
  return static_cast<unsigned>(std::min<int64_t>(kMaxThreads, 32 * ceil_div(channels, 32)));
}

// The operands' geometry; ids themselves are checked on the device.
void check_embedding(const char* kernel, const Tensor& ids, const Tensor& table,
                     const Tensor& rows) {
  GLASS_CHECK(ids.dtype() == DType::i32 && ids.is_contiguous() && ids.numel() < kNoBadId,
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

// The first position holding a bad id, as the kernels report it (see the file comment).
class BadIdFlag {
 public:
  explicit BadIdFlag(const Tensor& ids)
      : flag_(Tensor::from_host(&kNoBadId, {1}, DType::i32, ids.device())) {}
  int* data() const { return flag_.data<int32_t>(); }

  // Throws naming the position and the value when a kernel recorded one.
  void check(const char* kernel, const Tensor& ids, const Tensor& table) const {
    int position = kNoBadId;
    flag_.copy_to_host(&position);
    if (position == kNoBadId) return;
    int value = 0;
    ids.as_strided({1}, {1}, ids.offset() + position).copy_to_host(&value);
    fail("{}: id {} at position {} is outside the table's rows [0, {}) of {}", kernel, value,
         position, table.size(0), table.describe());
  }

 private:
  Tensor flag_;
};

// Whether `id` indexes a row; a bad one's position goes to the flag. Called for each token by the
// one thread of column 0, so that every bad id is recorded once.
__device__ bool valid_id(int id, int64_t vocab, int64_t position, int* bad_position) {
  const bool valid = id >= 0 && id < vocab;
  if (!valid) atomicMin(bad_position, static_cast<int>(position));
  return valid;
}

// out[i] = table[ids[i]]. Thread mapping: block row blockIdx.y takes tokens blockIdx.y,
// blockIdx.y + gridDim.y, ...; for each, the threads of block column blockIdx.x copy consecutive
// channels, so a warp reads 32 consecutive floats of one table row and writes them to one out row
// (coalesced). Columns past C (the tail block) only take part in checking the id.
template <class T>
__global__ void embedding_forward_kernel(const int* ids, const T* table, T* out, int64_t n,
                                         int64_t vocab, int64_t channels, int* bad_position) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = blockIdx.y; i < n; i += gridDim.y) {
    const int id = ids[i];
    // Thread 0 of the row checks the id; every thread skips a bad one.
    const bool valid = c == 0 ? valid_id(id, vocab, i, bad_position) : id >= 0 && id < vocab;
    if (valid && c < channels) out[i * channels + c] = table[id * channels + c];
  }
}

// dtable[v][c] = sum of dout[i][c] over the positions i with ids[i] == v, in ascending i, summed
// in f32 (dout of type T: f32 or bf16). Thread
// mapping: thread c (over the whole grid) owns column c of dtable: it zeroes the column, then walks
// every token in order and adds dout[i][c] to dtable[ids[i]][c]. Consecutive threads take
// consecutive columns, so each step reads a row of dout and updates a row of dtable coalesced.
// The parallelism is C threads each walking N tokens: enough for toy sizes; a sort by id would
// spread the work wider. Columns past C (the tail block) return at once.
template <class T>
__global__ void embedding_backward_kernel(const int* ids, const T* dout, float* dtable, int64_t n,
                                          int64_t vocab, int64_t channels, int* bad_position) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  for (int64_t v = 0; v < vocab; ++v) dtable[v * channels + c] = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const int id = ids[i];
    const bool valid = c == 0 ? valid_id(id, vocab, i, bad_position) : id >= 0 && id < vocab;
    if (valid) dtable[id * channels + c] += to_compute(dout[i * channels + c]);
  }
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) {
  check_embedding("embedding_forward", ids, table, out);
  const int64_t n = ids.numel(), vocab = table.size(0), channels = table.size(1);
  if (n == 0 || channels == 0) return;  // nothing to gather (nor any id to check)
  const BadIdFlag bad_id(ids);
  LaunchInfo info;
  info.kernel = "embedding_forward";
  info.device = table.device();
  info.block = {threads_for(channels), 1, 1};
  info.grid = {ceil_div(channels, info.block.x), static_cast<unsigned>(std::min(n, kMaxGridY)), 1};
  // Reads the ids and n table rows, writes n rows.
  info.bytes = static_cast<double>(ids.nbytes()) +
               2.0 * static_cast<double>(n * channels * dtype_size(table.dtype()));
  visit_f32_bf16(table, "embedding_forward", [&]<class T>() {
    launch_cuda_kernel(info, embedding_forward_kernel<T>, ids.data<int32_t>(), table.data<T>(),
                       out.data<T>(), n, vocab, channels, bad_id.data());
  });
  bad_id.check("embedding_forward", ids, table);
}

void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable) {
  check_embedding("embedding_backward", ids, dtable, dout);
  const int64_t n = ids.numel(), vocab = dtable.size(0), channels = dtable.size(1);
  if (channels == 0) return;  // nothing to write
  const BadIdFlag bad_id(ids);
  LaunchInfo info;
  info.kernel = "embedding_backward";
  info.device = dtable.device();
  info.block = {threads_for(channels), 1, 1};
  info.grid = {ceil_div(channels, info.block.x), 1, 1};
  // One add per element of dout; reads the ids and dout, writes the f32 sums.
  info.flops = static_cast<double>(n * channels);
  info.bytes = static_cast<double>(ids.nbytes() + dout.nbytes()) +
               4.0 * static_cast<double>(vocab * channels);
  // The sums go straight into an f32 table; a bf16 one gets them through an f32 scratch table.
  const bool f32 = dtable.dtype() == DType::f32;
  const Tensor sums = f32 ? dtable : Tensor::empty(dtable.shape(), DType::f32, dtable.device());
  visit_f32_bf16(dout, "embedding_backward", [&]<class T>() {
    launch_cuda_kernel(info, embedding_backward_kernel<T>, ids.data<int32_t>(), dout.data<T>(),
                       sums.data<float>(), n, vocab, channels, bad_id.data());
  });
  bad_id.check("embedding_backward", ids, dtable);
  if (!f32) cast(sums, dtable);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
