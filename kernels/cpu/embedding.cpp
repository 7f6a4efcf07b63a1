// cpu embedding: gather rows of a table by token id, and the scatter-add that is its gradient.
//
// The backward is deterministic without atomics: positions are bucketed by id with a stable
// counting sort, then every table row is summed by one thread from its positions in ascending
// order, the same order a serial loop would use. Unused rows come out zero.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/costs/embedding.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// Checks the operands' geometry and that every id indexes a row; names the first bad id.
void check_embedding(const char* kernel, const Tensor& ids, const Tensor& table,
                     const Tensor& rows) {
  GLASS_CHECK(ids.dtype() == DType::i32 && ids.is_contiguous(), "{}: ids {} must be contiguous i32",
              kernel, ids.describe());
  GLASS_CHECK(table.dim() == 2 && table.is_contiguous() && rows.is_contiguous() &&
                  rows.dtype() == table.dtype() && rows.numel() == ids.numel() * table.size(1),
              "{}: table {} must be contiguous [V, C] and rows {} contiguous [{}, C] of its dtype",
              kernel, table.describe(), rows.describe(), ids.numel());
  const int32_t* id = ids.data<int32_t>();
  const int64_t vocab = table.size(0);
  for (int64_t i = 0; i < ids.numel(); ++i)
    GLASS_CHECK(id[i] >= 0 && id[i] < vocab,
                "{}: id {} at position {} is outside the table's rows [0, {}) of {}", kernel, id[i],
                i, vocab, table.describe());
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, const Tensor& out) {
  check_embedding("embedding_forward", ids, table, out);
  const int64_t n = ids.numel();
  const size_t row_bytes = static_cast<size_t>(table.size(1)) * dtype_size(table.dtype());
  const LaunchCost cost = embedding_forward_cost(ids, out);
  launch(cpu_launch_info("embedding_forward", n, cost.flops, cost.bytes), [&] {
    const int32_t* id = ids.data<int32_t>();
    const char* src = static_cast<const char*>(table.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    // out[i] = table[ids[i]]: a row copy, whatever the dtype.
    parallel_ranges(n, n * row_bytes >= 4 * kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        std::memcpy(dst + i * row_bytes, src + id[i] * row_bytes, row_bytes);
    });
  });
}

void embedding_backward(const Tensor& ids, const Tensor& dout, const Tensor& dtable) {
  check_embedding("embedding_backward", ids, dtable, dout);
  const int64_t n = ids.numel(), vocab = dtable.size(0), channels = dtable.size(1);
  const double es = static_cast<double>(dtype_size(dtable.dtype()));
  launch(cpu_launch_info("embedding_backward", vocab, static_cast<double>(n * channels),
                         n * (4.0 + es * channels) + es * vocab * channels),
         [&] {
           const int32_t* id = ids.data<int32_t>();
           // Stable counting sort: positions[first[v] .. first[v + 1]) are the positions of id v,
           // ascending.
           std::vector<int64_t> first(static_cast<size_t>(vocab + 1), 0);
           for (int64_t i = 0; i < n; ++i) ++first[id[i] + 1];
           for (int64_t v = 0; v < vocab; ++v) first[v + 1] += first[v];
           std::vector<int64_t> positions(static_cast<size_t>(n));
           std::vector<int64_t> fill = first;
           for (int64_t i = 0; i < n; ++i) positions[fill[id[i]]++] = i;
           visit_element(dtable, "embedding_backward", [&]<class T>() {
             using A = compute_t<T>;
             const T* g = dout.data<T>();
             T* dt = dtable.data<T>();
             // dtable[v] = sum of dout rows at the positions of v, in ascending position order,
             // summed in compute_t<T> (f32 for bf16) and rounded once.
             parallel_ranges(vocab, worth_threading(vocab, vocab * channels),
                             [&](int64_t begin, int64_t end) {
                               std::vector<A> sum(static_cast<size_t>(channels));
                               for (int64_t v = begin; v < end; ++v) {
                                 std::fill(sum.begin(), sum.end(), A(0));
                                 for (int64_t p = first[v]; p < first[v + 1]; ++p) {
                                   const T* src = g + positions[p] * channels;
                                   for (int64_t c = 0; c < channels; ++c)
                                     sum[c] += to_compute(src[c]);
                                 }
                                 T* row = dt + v * channels;
                                 for (int64_t c = 0; c < channels; ++c)
                                   row[c] = from_compute<T>(sum[c]);
                               }
                             });
           });
         });
}

}  // namespace glass::kernels::cpu
