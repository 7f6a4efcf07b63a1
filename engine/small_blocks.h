// SmallBlocks: the cpu allocator's cache of small blocks (up to 1 KiB), carved from 64 KiB slabs.
//
// An eager op on a small tensor (a bias, a scalar loss, a 16-element op in a long recorded chain)
// needs a block of tens of bytes. Rounded to the allocator's general 512-byte classes and taken
// from aligned_alloc one by one, a 64-byte tensor held a 528-byte malloc chunk: an op that saves a
// small input for backward kept 8 times its values' bytes. Here a request is rounded up to a
// multiple of 64 bytes (its size class: 64, 128, ..., 1024) and served from that class's free list,
// or cut from the class's current slab. Every block starts on a 64-byte boundary, as the cpu
// allocator's larger blocks do: a cache line, so a 64-byte AVX-512 load of a tensor's start never
// straddles two (the cpu kernels use unaligned loads, so this is speed, not correctness). Blocks of
// one class never serve another: a slab holds one class.
//
// Slabs are obtained from the system once and kept: a freed block goes onto its class's free list,
// and the next request of that class reuses it without a system call or a page fault. A slab is
// given back only by release_empty_slabs() (Allocator::empty_cache), and only when none of its
// blocks is live. Accounting (engine/allocator.h): a block counts as allocated at its class size
// while live; a slab counts as reserved, all 64 KiB of it, from when it is obtained until it is
// given back, so reserved - allocated is the free blocks plus the slabs' uncut remainders.
//
// Not thread-safe: the Allocator holds its lock around every call.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace glass {

class SmallBlocks {
 public:
  static constexpr size_t kAlignment = 64;         // every block's address is a multiple
  static constexpr size_t kMaxBytes = 1024;        // larger requests go to the general classes
  static constexpr size_t kSlabBytes = 64 * 1024;  // also the slabs' alignment
  static constexpr size_t kClasses = kMaxBytes / kAlignment;

  // Whether a request of `bytes` is served here.
  static bool serves(size_t bytes) { return bytes <= kMaxBytes; }
  // The request rounded up to its class: a multiple of 64, at least 64.
  static size_t size_class(size_t bytes) {
    return bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }

  SmallBlocks() = default;
  ~SmallBlocks();  // gives back the slabs with no live block
  SmallBlocks(const SmallBlocks&) = delete;
  SmallBlocks& operator=(const SmallBlocks&) = delete;

  // A block of class `size_class(bytes)`, or nullptr when the system has no memory for a new
  // slab. `new_slab` is set when a slab was obtained for it (kSlabBytes more reserved).
  void* take(size_t bytes, bool& new_slab);
  // `ptr`, a block taken with `bytes`, is free again.
  void give(void* ptr, size_t bytes);
  // Gives back the slabs none of whose blocks is live; returns how many bytes that was.
  size_t release_empty_slabs();

  size_t slabs() const { return slab_count_; }

 private:
  // At the start of each slab; the blocks follow from the first 64-byte boundary after it.
  struct Slab {
    Slab* next;    // all slabs, in a list
    size_t cls;    // the size class of its blocks
    int64_t live;  // blocks handed out and not given back
  };
  struct FreeBlock {
    FreeBlock* next;
  };
  static Slab* slab_of(void* block);
  static size_t index(size_t cls) { return cls / kAlignment - 1; }

  std::array<FreeBlock*, kClasses> free_{};  // per class: blocks given back, last first
  std::array<char*, kClasses> cut_{};        // per class: the next uncut block of its newest slab
  std::array<char*, kClasses> cut_end_{};    // ... and where that slab ends
  Slab* slabs_ = nullptr;
  size_t slab_count_ = 0;
};

}  // namespace glass
