#include "engine/small_blocks.h"

#include <cstdint>
#include <cstdlib>
#include <new>

namespace glass {

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
    new_slab = true;
  }
  char* block = cut_[i];
  cut_[i] += cls;
  slab_of(block)->live++;
  return block;
}

void SmallBlocks::give(void* ptr, size_t bytes) {
  const size_t i = index(size_class(bytes));
  slab_of(ptr)->live--;
  auto* b = static_cast<FreeBlock*>(ptr);
  b->next = free_[i];
  free_[i] = b;
}

size_t SmallBlocks::release_empty_slabs() {
  // Free blocks of empty slabs leave their lists first; a class's cutting point goes with its slab.
  for (size_t i = 0; i < kClasses; ++i) {
    FreeBlock** link = &free_[i];
    while (*link != nullptr) {
      if (slab_of(*link)->live == 0)
        *link = (*link)->next;
      else
        link = &(*link)->next;
    }
    if (cut_[i] != nullptr && slab_of(cut_[i] - 1)->live == 0) cut_[i] = cut_end_[i] = nullptr;
  }
  size_t released = 0;
  Slab** link = &slabs_;
  while (*link != nullptr) {
    Slab* slab = *link;
    if (slab->live == 0) {
      *link = slab->next;
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
