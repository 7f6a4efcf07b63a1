#include "engine/object_pool.h"

#include <array>
#include <cstdint>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace glass::object_pool {

namespace {

// Under AddressSanitizer a cached block is poisoned: touching a freed TensorImpl or Node is
// reported as a use after free until the block is handed out again.
#if defined(__SANITIZE_ADDRESS__)
void poison(void* block, size_t bytes) { __asan_poison_memory_region(block, bytes); }
void unpoison(void* block, size_t bytes) { __asan_unpoison_memory_region(block, bytes); }
#else
void poison(void*, size_t) {}
void unpoison(void*, size_t) {}
#endif

constexpr size_t kClasses = (class_bytes(kMaxBytes) + 8) / kGranule - 1;  // chunks 32..512

struct FreeBlock {
  FreeBlock* next;
};

// This thread's free lists. Constant-initialised and trivially destructible, so reading them costs
// no guard; `Drain` below gives their blocks back when the thread ends.
struct FreeLists {
  std::array<FreeBlock*, kClasses> head;
  std::array<uint32_t, kClasses> count;
  bool drain_registered;  // a Drain will empty the lists when the thread ends
  bool closed;            // it has: blocks freed from now on go to ::operator delete
};
constinit thread_local FreeLists lists{};

size_t class_index(size_t bytes) { return (class_bytes(bytes) + 8) / kGranule - 2; }
size_t bytes_of_class(size_t c) { return (c + 2) * kGranule - 8; }

struct Drain {
  ~Drain() {
    for (size_t c = 0; c < kClasses; ++c)
      while (FreeBlock* b = lists.head[c]) {
        unpoison(b, bytes_of_class(c));
        lists.head[c] = b->next;
        ::operator delete(b);
      }
    lists.count = {};
    lists.closed = true;
  }
};

// The first block cached on a thread registers the thread's Drain.
void register_drain() {
  thread_local Drain drain;
  lists.drain_registered = true;
}

}  // namespace

void* allocate(size_t bytes) {
  if (bytes == 0 || bytes > kMaxBytes) return ::operator new(bytes);
  const size_t c = class_index(bytes);
  if (FreeBlock* b = lists.head[c]) {
    unpoison(b, bytes_of_class(c));
    lists.head[c] = b->next;
    --lists.count[c];
    return b;
  }
  return ::operator new(bytes_of_class(c));  // the class's size: any object of the class fits
}

void release(void* block, size_t bytes) noexcept {
  if (block == nullptr) return;
  if (bytes == 0 || bytes > kMaxBytes || lists.closed) return ::operator delete(block);
  const size_t c = class_index(bytes);
  if (lists.count[c] >= kMaxCached) return ::operator delete(block);
  if (!lists.drain_registered) register_drain();
  auto* b = static_cast<FreeBlock*>(block);
  b->next = lists.head[c];
  poison(b, bytes_of_class(c));
  lists.head[c] = b;
  ++lists.count[c];
}

size_t cached_blocks() {
  size_t n = 0;
  for (uint32_t k : lists.count) n += k;
  return n;
}

}  // namespace glass::object_pool
