#include "engine/small_blocks.h"

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define GLASS_SMALL_BLOCKS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GLASS_SMALL_BLOCKS_ASAN 1
#endif
#endif
#if defined(GLASS_SMALL_BLOCKS_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace glass {

namespace {
// Under AddressSanitizer, memory the cache holds but no tensor owns (free blocks, the uncut rest of
// a slab) is poisoned: a read or write through a freed tensor's pointer, or past the end of a
// block's class into a neighbour not handed out, is reported as it would be with malloc. A block
// handed out is addressable in its whole class.
void poison(void* p, size_t n) {
#if defined(GLASS_SMALL_BLOCKS_ASAN)
  ASAN_POISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}
void unpoison(void* p, size_t n) {
#if defined(GLASS_SMALL_BLOCKS_ASAN)
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#else
  (void)p, (void)n;
#endif
}
}  // namespace

static_assert(sizeof(void*) <= SmallBlocks::kAlignment, "a free block holds its list pointer");

SmallBlocks::Slab* SmallBlocks::slab_of(void* block) {
  // Slabs are aligned to their size, so a block's slab starts at its address rounded down.
  return reinterpret_cast<Slab*>(reinterpret_cast<uintptr_t>(block) & ~uintptr_t{kSlabBytes - 1});
}

void* SmallBlocks::take(size_t bytes, bool& new_slab) {
  const size_t cls = size_class(bytes);
  const size_t i = index(cls);
  new_slab = false;
  if (FreeBlock* b = free_[i]) {
    unpoison(b, cls);
    free_[i] = b->next;
    slab_of(b)->live++;
    return b;
  }
  if (cut_[i] == nullptr || cut_end_[i] - cut_[i] < static_cast<std::ptrdiff_t>(cls)) {
    void* memory = std::aligned_alloc(kSlabBytes, kSlabBytes);
    if (memory == nullptr) return nullptr;
    Slab* slab = ::new (memory) Slab{slabs_, cls, 0};
    slabs_ = slab;
    slab_count_++;
    cut_[i] = static_cast<char*>(memory) + kAlignment;  // the header's cache line, then blocks
    cut_end_[i] = static_cast<char*>(memory) + kSlabBytes;
    poison(cut_[i], static_cast<size_t>(cut_end_[i] - cut_[i]));
    new_slab = true;
  }
  char* block = cut_[i];
  cut_[i] += cls;
  slab_of(block)->live++;
  unpoison(block, cls);
  return block;
}

void SmallBlocks::give(void* ptr, size_t bytes) {
  const size_t cls = size_class(bytes);
  const size_t i = index(cls);
  slab_of(ptr)->live--;
  auto* b = static_cast<FreeBlock*>(ptr);
  b->next = free_[i];
  free_[i] = b;
  poison(b, cls);
}

size_t SmallBlocks::release_empty_slabs() {
  // Free blocks of empty slabs leave their lists first (each list rebuilt from its survivors, in
  // order); a class's cutting point goes with its slab.
  std::vector<FreeBlock*> kept;
  for (size_t i = 0; i < kClasses; ++i) {
    const size_t cls = (i + 1) * kAlignment;
    kept.clear();
    for (FreeBlock* b = free_[i]; b != nullptr;) {
      unpoison(b, cls);
      FreeBlock* next = b->next;
      if (slab_of(b)->live != 0) kept.push_back(b);
      b = next;
    }
    free_[i] = nullptr;
    for (size_t k = kept.size(); k-- > 0;) {
      kept[k]->next = free_[i];
      free_[i] = kept[k];
    }
    for (FreeBlock* b : kept) poison(b, cls);
    if (cut_[i] != nullptr && slab_of(cut_[i] - 1)->live == 0) cut_[i] = cut_end_[i] = nullptr;
  }
  size_t released = 0;
  Slab** link = &slabs_;
  while (*link != nullptr) {
    Slab* slab = *link;
    if (slab->live == 0) {
      *link = slab->next;
      unpoison(slab, kSlabBytes);
      std::free(slab);
      slab_count_--;
      released += kSlabBytes;
    } else {
      link = &slab->next;
    }
  }
  return released;
}

// A slab with a live block stays: a tensor in a static may still give its block back at exit.
SmallBlocks::~SmallBlocks() { release_empty_slabs(); }

}  // namespace glass
