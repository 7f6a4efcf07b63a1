// What a recorded op holds, in bytes, as an upper bound from deterministic counters (never a
// timing): a chain of recorded 16-element adds kept alive, as bench/op_overhead runs it, and the
// memory it holds per op. Host objects (node, edges, TensorImpl, Storage, control blocks) are
// counted by this executable's own operator new and delete, each block at its malloc chunk (usable
// size + 8-byte header), as the bytes held at the end minus those held at the start; the values'
// blocks by the cpu allocator's reserved bytes (whole 64 KiB slabs, engine/small_blocks.h).
// Its own executable: replacing the global operator new would count every other suite's work.
#include <gtest/gtest.h>

#include <malloc.h>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "autograd/ops.h"
#include "engine/allocator.h"

namespace {

std::atomic<int64_t> heap_bytes{0};       // glibc chunk bytes held by operator new's blocks now
std::atomic<int64_t> bytes_allocated{0};  // chunk bytes operator new has handed out, in all

// A block's chunk: its usable size plus glibc's 8-byte header.
int64_t chunk_bytes(void* p) { return static_cast<int64_t>(malloc_usable_size(p)) + 8; }

void* counted_malloc(size_t n, size_t alignment) {
  void* p = alignment > 16
                ? std::aligned_alloc(alignment, (n + alignment - 1) / alignment * alignment)
                : std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  heap_bytes.fetch_add(chunk_bytes(p), std::memory_order_relaxed);
  bytes_allocated.fetch_add(chunk_bytes(p), std::memory_order_relaxed);
  return p;
}

void counted_free(void* p) {
  if (p == nullptr) return;
  heap_bytes.fetch_sub(chunk_bytes(p), std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

void* operator new(size_t n) { return counted_malloc(n, 16); }
void* operator new[](size_t n) { return counted_malloc(n, 16); }
void* operator new(size_t n, std::align_val_t a) {
  return counted_malloc(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a) {
  return counted_malloc(n, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { counted_free(p); }

namespace glass {
namespace {

struct Held {
  double heap_per_op, values_per_op;
};

// The bytes newly held per recorded op by a chain of `ops` ops of 16-element tensors, x <- x op y
// with y all ones, kept alive (the tape owns it through x) until one backward.
template <class Op>
Held chain_bytes(int ops, Op op) {
  Allocator& cpu = Allocator::for_device(kCPU);
  const Tensor y = ones({16});
  Tensor x0 = zeros({16});
  x0.set_requires_grad(true);
  {  // first use of the thread's tape, creation-site caches and the like, outside the count
    Tensor x = x0;
    for (int i = 0; i < 8; ++i) x = op(x, y);
    backward(sum(x));
  }
  Tensor x = x0;
  const int64_t nodes_before = Tape::live_nodes();
  const int64_t heap_before = heap_bytes.load();
  const int64_t reserved_before = cpu.stats().reserved_bytes;
  for (int i = 0; i < ops; ++i) x = op(x, y);
  const int64_t heap = heap_bytes.load() - heap_before;
  const int64_t reserved = cpu.stats().reserved_bytes - reserved_before;
  // The chain is really there, one node per add, and backward runs over all of it.
  EXPECT_EQ(Tape::live_nodes() - nodes_before, ops);
  backward(sum(x));
  EXPECT_EQ(item(sum(x0.grad())), 2 * 16.0);  // each element's gradient is 1, twice (warm-up)
  return {static_cast<double>(heap) / ops, static_cast<double>(reserved) / ops};
}

// Issue 34's goal: at most 512 bytes per recorded op. add saves nothing and its edge holds the
// producer's node, not its tensor, so each step's previous output is freed and reused: what the
// chain holds per op is the node (440 bytes and its control block, docs/design.md).
TEST(TapeBytes, ARecordedAddHoldsAtMost512Bytes) {
  const Held held = chain_bytes(4000, [](const Tensor& x, const Tensor& y) { return add(x, y); });
  EXPECT_LE(held.values_per_op, 1.0) << "add's chain keeps no values";
  EXPECT_LE(held.heap_per_op + held.values_per_op, 512)
      << "heap " << held.heap_per_op << " B + values " << held.values_per_op << " B per op";
  RecordProperty("add_heap_bytes_per_op", std::to_string(held.heap_per_op));
}

// mul saves both inputs: each step also keeps its input x (TensorImpl, Storage, a 64-byte block of
// values in a slab) and the saved handles.
TEST(TapeBytes, ARecordedMulHoldsItsSavedInputToo) {
  const Held held = chain_bytes(4000, [](const Tensor& x, const Tensor& y) { return mul(x, y); });
  // One 64-byte block per op; a 64 KiB slab holds 1023 of them: at most 4 new slabs for 4000.
  EXPECT_LE(held.values_per_op, 66.0) << "values' bytes per op";
  EXPECT_LE(held.heap_per_op + held.values_per_op, 464 + 48 + 240 + 48 + 64 + 2)
      << "heap " << held.heap_per_op << " B + values " << held.values_per_op << " B per op";
  RecordProperty("mul_heap_bytes_per_op", std::to_string(held.heap_per_op));
}

// backward() allocates nothing per node once its thread has run a pass as long: the pass's lists
// (a gradient slot per node, the order, the search's stack) are kept between passes
// (autograd/backward.cpp, PassLists), and add's gradients go on inline (InputGrads). Grown afresh
// each time, the lists of 4000 nodes took ~200 KB of blocks from operator new per backward().
TEST(TapeBytes, ARepeatedBackwardAllocatesNothingPerNode) {
  const Tensor y = ones({16});
  const auto chain = [&](const Tensor& x0) {
    Tensor x = x0;
    for (int i = 0; i < 4000; ++i) x = add(x, y);
    return sum(x);
  };
  Tensor x0 = zeros({16});
  x0.set_requires_grad(true);
  backward(chain(x0));  // the first pass of this length grows the lists
  const Tensor loss = chain(x0);
  const int64_t before = bytes_allocated.load();
  backward(loss);
  const int64_t during = bytes_allocated.load() - before;
  EXPECT_EQ(item(sum(x0.grad())), 2 * 16.0);  // both passes ran over the whole chain
  // what is left is per pass, not per node: the seed, the sum's gradient, the leaf's entries
  EXPECT_LE(during, 4096) << during << " bytes from operator new during a backward of 4000 nodes";
  RecordProperty("second_backward_bytes_allocated", std::to_string(during));
}

}  // namespace
}  // namespace glass
