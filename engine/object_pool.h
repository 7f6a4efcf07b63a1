// ObjectPool: a per-thread cache of the small heap objects every eager op makes and frees.
//
// An op on a small tensor allocates two objects besides its data: the output's TensorImpl and its
// Storage (each with its shared_ptr control block); a recorded op adds its autograd Node. Through
// malloc and free those cost ~250 instructions per op, more than a 16-element add's arithmetic.
// Here a freed object's block goes onto this thread's free list of its size class, and the next
// object of that class takes it back: a few instructions, no lock, no atomic. Objects made with
// PooledAllocator<T> (std::allocate_shared) come from here.
//
// The classes are glibc malloc's chunk sizes (a chunk is the request + an 8-byte header, rounded
// up to 16): a class's blocks are ::operator new'd at the chunk's usable size (24, 40, 56, ...,
// up to 504 bytes), so an object costs the same memory pooled as it did from malloc.
//
// - A block may be freed on another thread than the one that took it: it joins the freeing
//   thread's list (all blocks come from ::operator new, so any thread may finally delete them).
// - A list keeps at most kMaxCached blocks; beyond that a freed block goes back to the system, so
//   a thread that once held many tensors does not keep their blocks forever.
// - When a thread ends, its lists are given back, and blocks freed after that (by the destructors
//   of statics at exit) go straight to ::operator delete.
// - Under AddressSanitizer a cached block is poisoned until it is handed out again, so that a use
//   after free of a tensor or node is still caught (until its block is reused).
#pragma once

#include <cstddef>
#include <new>

namespace glass {

namespace object_pool {
inline constexpr size_t kGranule = 16;      // chunks are multiples of this, and so is alignment
inline constexpr size_t kMaxBytes = 504;    // larger objects go to ::operator new directly
inline constexpr size_t kMaxCached = 4096;  // blocks kept per size class and thread
// The block size of the class serving `bytes`: the usable size of malloc's chunk for it.
constexpr size_t class_bytes(size_t bytes) {
  const size_t chunk = (bytes + 8 + kGranule - 1) / kGranule * kGranule;
  return (chunk < 32 ? 32 : chunk) - 8;
}
void* allocate(size_t bytes);
void release(void* block, size_t bytes) noexcept;
// Blocks on this thread's free lists, over all classes (tests).
size_t cached_blocks();
}  // namespace object_pool

// A standard allocator over object_pool: std::allocate_shared<T>(PooledAllocator<T>()) makes T and
// its control block in one pooled block.
template <class T>
struct PooledAllocator {
  using value_type = T;
  static_assert(alignof(T) <= object_pool::kGranule, "PooledAllocator: over-aligned type");

  PooledAllocator() = default;
  template <class U>
  PooledAllocator(const PooledAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

  T* allocate(size_t n) { return static_cast<T*>(object_pool::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { object_pool::release(p, n * sizeof(T)); }

  template <class U>
  bool operator==(const PooledAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace glass
