// SmallBlocks (engine/small_blocks.h), alone and as the cpu allocator's path for blocks up to
// 1 KiB: the size classes, 64-byte alignment, reuse within a class and never across classes,
// slabs given back only when empty, the allocator's allocated/reserved figures, and several
// threads allocating at once.
#include "engine/small_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "engine/allocator.h"
#include "engine/tensor.h"

namespace glass {
namespace {

constexpr size_t kSlab = SmallBlocks::kSlabBytes;

bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

TEST(SmallBlocks, SizeClassesAreMultiplesOf64UpTo1KiB) {
  EXPECT_EQ(SmallBlocks::size_class(0), 64u);
  EXPECT_EQ(SmallBlocks::size_class(1), 64u);
  EXPECT_EQ(SmallBlocks::size_class(64), 64u);
  EXPECT_EQ(SmallBlocks::size_class(65), 128u);
  EXPECT_EQ(SmallBlocks::size_class(1000), 1024u);
  EXPECT_EQ(SmallBlocks::size_class(1024), 1024u);
  EXPECT_TRUE(SmallBlocks::serves(1024));
  EXPECT_FALSE(SmallBlocks::serves(1025));
  // Through the cpu allocator: small requests in 64-byte classes, larger ones in the general ones.
  const Allocator& cpu = Allocator::for_device(kCPU);
  EXPECT_EQ(cpu.class_of(4), 64u);
  EXPECT_EQ(cpu.class_of(1024), 1024u);
  EXPECT_EQ(cpu.class_of(1025), Allocator::size_class(1025));
}

TEST(SmallBlocks, BlocksAreAlignedDistinctAndKeepTheirBytes) {
  SmallBlocks blocks;
  struct Taken {
    unsigned char* p;
    size_t bytes;
  };
  std::vector<Taken> taken;
  bool new_slab = false;
  // Every class, several times over, interleaved; each block filled to its full class size.
  for (int round = 0; round < 40; ++round)
    for (size_t bytes = 1; bytes <= SmallBlocks::kMaxBytes; bytes += 61) {
      auto* p = static_cast<unsigned char*>(blocks.take(bytes, new_slab));
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned64(p)) << bytes;
      std::memset(p, static_cast<int>(taken.size() % 251), SmallBlocks::size_class(bytes));
      taken.push_back({p, bytes});
    }
  // No two blocks overlap: sorted by address, each ends before the next begins.
  std::vector<Taken> sorted = taken;
  std::sort(sorted.begin(), sorted.end(), [](const Taken& a, const Taken& b) { return a.p < b.p; });
  for (size_t i = 1; i < sorted.size(); ++i)
    ASSERT_LE(sorted[i - 1].p + SmallBlocks::size_class(sorted[i - 1].bytes), sorted[i].p);
  // And none was overwritten by another's fill.
  for (size_t i = 0; i < taken.size(); ++i)
    for (size_t b = 0; b < SmallBlocks::size_class(taken[i].bytes); ++b)
      ASSERT_EQ(taken[i].p[b], i % 251) << "block " << i << " byte " << b;
  for (const Taken& t : taken) blocks.give(t.p, t.bytes);
}

TEST(SmallBlocks, AFreedBlockServesItsOwnClassOnly) {
  SmallBlocks blocks;
  bool new_slab = false;
  void* a = blocks.take(64, new_slab);
  EXPECT_TRUE(new_slab);
  void* b = blocks.take(40, new_slab);  // the same class: the same slab
  EXPECT_FALSE(new_slab);
  blocks.give(a, 64);
  // A request of another class never gets the freed 64-byte block (its own slab is new).
  void* c = blocks.take(100, new_slab);
  EXPECT_NE(c, a);
  EXPECT_TRUE(new_slab);
  EXPECT_EQ(blocks.slabs(), 2u);
  // A request of the freed block's class gets it back, the last freed first.
  EXPECT_EQ(blocks.take(1, new_slab), a);
  EXPECT_FALSE(new_slab);
  blocks.give(b, 40);
  blocks.give(c, 100);
  blocks.give(a, 1);
}

TEST(SmallBlocks, ASlabHoldsItsClassUntilFullThenANewOneComes) {
  SmallBlocks blocks;
  bool new_slab = false;
  const size_t per_slab =
      (kSlab - SmallBlocks::kAlignment) / 1024;  // the header's line, then blocks
  std::vector<void*> taken;
  int slabs_made = 0;
  for (size_t i = 0; i < per_slab + 1; ++i) {
    taken.push_back(blocks.take(1024, new_slab));
    slabs_made += new_slab;
  }
  EXPECT_EQ(slabs_made, 2);
  for (void* p : taken) blocks.give(p, 1024);
}

TEST(SmallBlocks, OnlySlabsWithNoLiveBlockAreGivenBack) {
  SmallBlocks blocks;
  bool new_slab = false;
  void* small = blocks.take(64, new_slab);
  void* kept = blocks.take(512, new_slab);
  void* other = blocks.take(520, new_slab);  // class 576: a third slab
  EXPECT_EQ(blocks.slabs(), 3u);
  blocks.give(small, 64);
  blocks.give(other, 520);
  EXPECT_EQ(blocks.release_empty_slabs(), 2 * kSlab);
  EXPECT_EQ(blocks.slabs(), 1u);
  EXPECT_EQ(blocks.release_empty_slabs(), 0u);
  // The released slabs' free blocks are gone from the lists: the next 64-byte request needs a slab.
  void* again = blocks.take(64, new_slab);
  EXPECT_TRUE(new_slab);
  EXPECT_TRUE(aligned64(again));
  blocks.give(again, 64);
  blocks.give(kept, 512);
  EXPECT_EQ(blocks.release_empty_slabs(), 2 * kSlab);
  EXPECT_EQ(blocks.slabs(), 0u);
}

// The cpu allocator's figures: a live block counts at its class as allocated; a slab counts whole
// as reserved from its first block until empty_cache() finds it empty.
TEST(SmallBlocks, CpuAllocatorCountsBlocksAsAllocatedAndSlabsAsReserved) {
  Allocator& cpu = Allocator::for_device(kCPU);
  const AllocatorStats before = cpu.stats();
  void* p = cpu.allocate(16 * 4);
  AllocatorStats s = cpu.stats();
  EXPECT_TRUE(aligned64(p));
  EXPECT_EQ(s.allocated_bytes - before.allocated_bytes, 64);
  EXPECT_EQ(s.alloc_count - before.alloc_count, 1);
  // Either a cached block (a hit) or a block of a new slab (one more device malloc, 64 KiB).
  const int64_t new_slabs = s.device_malloc_count - before.device_malloc_count;
  EXPECT_EQ(s.cache_hits - before.cache_hits, 1 - new_slabs);
  EXPECT_EQ(s.reserved_bytes - before.reserved_bytes, new_slabs * static_cast<int64_t>(kSlab));
  EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
  EXPECT_GE(s.peak_allocated_bytes, s.allocated_bytes);
  cpu.release(p, 16 * 4);
  // Freed, it is cached: allocated falls back, reserved stays, and the same request reuses it.
  s = cpu.stats();
  EXPECT_EQ(s.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(s.reserved_bytes - before.reserved_bytes, new_slabs * static_cast<int64_t>(kSlab));
  void* q = cpu.allocate(50);
  EXPECT_EQ(q, p);
  EXPECT_EQ(cpu.stats().cache_hits, s.cache_hits + 1);
  cpu.release(q, 50);
  // A tensor's storage goes the same way.
  {
    const Tensor t = Tensor::empty({3}, DType::f32);
    EXPECT_TRUE(aligned64(t.raw_data()));
    EXPECT_EQ(cpu.stats().allocated_bytes - before.allocated_bytes, 64);
  }
  EXPECT_EQ(cpu.stats().allocated_bytes, before.allocated_bytes);
  cpu.empty_cache();
  s = cpu.stats();
  EXPECT_LE(s.reserved_bytes, before.reserved_bytes);
  EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
}

// Threads allocating and freeing small blocks at once through the cpu allocator: every block keeps
// what its thread wrote, and the books balance afterwards.
TEST(SmallBlocks, ThreadsShareTheCpuAllocatorSafely) {
  Allocator& cpu = Allocator::for_device(kCPU);
  const int64_t allocated_before = cpu.stats().allocated_bytes;
  constexpr int kThreads = 4, kRounds = 2000, kLive = 16;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int r = 0; r < kRounds; ++r) {
        const size_t bytes = 1 + static_cast<size_t>((r * 37 + t * 101) % 1024);
        auto* p = static_cast<unsigned char*>(cpu.allocate(bytes));
        if (!aligned64(p)) failures[t]++;
        std::memset(p, t + 1, bytes);
        live.emplace_back(p, bytes);
        if (live.size() == kLive) {
          for (auto [q, n] : live) {
            for (size_t b = 0; b < n; ++b)
              if (q[b] != t + 1) {
                failures[t]++;
                break;
              }
            cpu.release(q, n);
          }
          live.clear();
        }
      }
      for (auto [q, n] : live) cpu.release(q, n);
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(cpu.stats().allocated_bytes, allocated_before);
}

}  // namespace
}  // namespace glass
