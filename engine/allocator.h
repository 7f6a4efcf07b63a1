// Allocator: one caching allocator per device.
//
// Requests are rounded up to a size class; a freed block goes onto its class's free list and is
// handed out again to the next request of that class without asking the device (a "cache hit").
// `allocated` counts bytes handed to tensors (rounded), `reserved` counts bytes obtained from the
// device and kept by the cache; reserved >= allocated always, and the difference is the cache.
// On `emu` with red zones (GLASS_EMU_CHECK=1) nothing is rounded or cached: each tensor gets an
// allocation of its exact size, so that writing one byte past its end is reported.
// On `meta` (engine/device.h) the allocator runs the same size classes, cache and statistics, but
// the device's malloc hands out addresses that hold nothing: 256-byte aligned as cudaMalloc's,
// unique while live, and non-canonical on x86-64, so that a host read of one faults instead of
// reading garbage. So allocated_bytes and its peak on meta are, byte for byte, what the same
// program's requests make them on cuda (or emu without red zones): the same sizes, rounded to
// the same classes, served by the same cache. What can differ: with several streams, cuda reuses
// a block freed on another stream only once that stream's work is done (meta, as emu, has one
// stream), so cuda may reserve more; meta never runs out, so it never empties its cache to retry.
// Not counted by any allocator, on meta or on a GPU: the CUDA context, cuBLAS's and cuDNN's own
// handles and NCCL's buffers.
// On `cpu`, requests of up to 1 KiB come from SmallBlocks (engine/small_blocks.h): 64-byte size
// classes cut from 64 KiB slabs, so that a small tensor costs its bytes rounded to 64, not a
// 512-byte class of its own from malloc. There `allocated` counts each live block at its class and
// `reserved` counts the slabs, whole, from when they are obtained until empty_cache() gives back
// the ones with no live block: the free blocks and the uncut rest of a slab are the cache. Private
// pools do not apply to them (pools serve CUDA graphs).
// On `cuda` the free lists are stream-aware (engine/free_blocks.h): a block is tagged with the
// stream that was current when it was freed.
//
// Planning another device's allocations (SizeClasses, PlannedClasses): meta rounds as cuda does
// (and as emu without red zones). While a PlannedClasses scope is active on meta's allocator it
// rounds as the planned device's instead: cpu's 64-byte classes for requests of up to 1 KiB (cut
// from no slab: meta backs nothing; each such block counts at its class, as on cpu), or emu's
// exact sizes under red zones. So a pre-flight on meta plans the allocated peak of the device it
// plans for (the reserved figure stays meta's: cpu reserves whole 64 KiB slabs).
//
// Private pools (CUDA graphs, engine/cuda/graph.h): while a PoolScope is active on a thread, that
// thread's requests to this allocator are served from the pool's own free lists (only blocks freed
// on the requesting stream: telling whether another stream of the capture is done with a block
// would take an event query, which a capture refuses); a miss there
// takes over a shared cached block freed on the thread's current stream (which becomes the
// pool's), and only then fresh device memory for the pool. Every block freed
// while the scope is active goes to the pool, also one that was allocated before it: the captured
// work may touch it again at every replay, in capture order, so only later captured requests may
// reuse it. A pool's blocks never serve requests outside its scope while the pool lives; when it
// is released (the graph is gone) its free blocks join the shared cache and its live blocks
// return there when their tensors free them. While the pool lives its free blocks count in use
// (AllocatorStats::in_use_bytes): the graph's replays write them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/device.h"
#include "engine/free_blocks.h"
#include "engine/small_blocks.h"
#include "engine/word_mutex.h"

namespace glass {

struct AllocatorStats {
  int64_t allocated_bytes = 0;  // in live tensors' storage (size-class rounded)
  int64_t reserved_bytes = 0;   // obtained from the device, live or cached
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t device_malloc_count = 0;  // calls to the device's own malloc
  int64_t cache_hits = 0;           // requests served from a free list or an already-reserved slab
  int64_t alloc_count = 0;          // all requests
  int64_t pool_reserved_bytes = 0;  // of reserved_bytes, held by private pools (graphs)
  // allocated_bytes plus the free blocks of private pools: a graph's replays write those blocks,
  // so no other request may have them and the cache cannot give them back; what the device must
  // hold at once. Equal to allocated_bytes where no graph was captured.
  int64_t in_use_bytes = 0;
  int64_t peak_in_use_bytes = 0;
};

class DeviceRuntime;

// How a device's allocator rounds a request, which is what allocated_bytes counts it at: the
// general classes (size_class below), cpu's 64-byte small-block classes up to 1 KiB, or exact
// sizes (emu with red zones: one allocation per tensor, uncached).
struct SizeClasses {
  bool exact = false;         // the device runtime's exact_sizes() (engine/device_runtime.h)
  bool small_blocks = false;  // its capabilities' small_host_blocks (cpu)
  // The bytes a request of `bytes` is counted at.
  size_t of(size_t bytes) const;
  // `d`'s allocator's rounding now (emu's red zones follow GLASS_EMU_CHECK).
  static SizeClasses of_device(Device d);
};

// The events FreeBlocks asks for: the device runtime's (engine/device_runtime.h), CUDA events on
// `cuda`. On devices without native streams every block is freed and taken on the null stream, so
// FreeBlocks never asks.
struct DeviceEvents {
  using Stream = void*;  // cudaStream_t on cuda, nullptr elsewhere
  using Event = void*;   // cudaEvent_t
  const DeviceRuntime* runtime = nullptr;
  Event record(Stream stream);
  bool done(Event event);
  void release(Event event);
};

class Allocator {
 public:
  static Allocator& for_device(Device d);
  // The allocator that served a block of `d` now given back: for cpu without for_device's
  // checks, which ran when the block was allocated.
  static Allocator& serving(Device d);

  void* allocate(size_t bytes);
  void release(void* ptr, size_t bytes);  // bytes as passed to allocate

  AllocatorStats stats() const;
  void reset_peaks();
  // The peaks as they were at `before`, or what is held now where that is more: the scratch
  // tensors of a measurement (kernels::measure_device_peaks), freed by now, leave no peak behind.
  void restore_peaks(const AllocatorStats& before);
  // Returns every cached (free) block to the device.
  void empty_cache();

  // Private pools. create_pool() returns a new empty pool's id (never 0); release_pool gives its
  // blocks to the shared cache (the free ones now, the live ones when freed).
  uint64_t create_pool();
  void release_pool(uint64_t pool);
  // The blocks `pool` owns now, free or live (for tests and reports).
  std::vector<void*> pool_blocks(uint64_t pool) const;
  // Routes this thread's requests to this allocator into `pool` for the scope's life.
  class PoolScope {
   public:
    PoolScope(Allocator& allocator, uint64_t pool);
    ~PoolScope();
    PoolScope(const PoolScope&) = delete;
    PoolScope& operator=(const PoolScope&) = delete;

   private:
    const Allocator* saved_allocator_;
    uint64_t saved_pool_;
  };

  // meta only: rounds as `classes` (another device's, SizeClasses::of_device) for the scope's life.
  // Blocks keep the class they were allocated at, whenever they are freed.
  class PlannedClasses {
   public:
    PlannedClasses(Allocator& meta, SizeClasses classes);
    ~PlannedClasses();
    PlannedClasses(const PlannedClasses&) = delete;
    PlannedClasses& operator=(const PlannedClasses&) = delete;

   private:
    Allocator& meta_;
    SizeClasses saved_;
  };

  int64_t allocated_bytes() const { return stats().allocated_bytes; }
  int64_t reserved_bytes() const { return stats().reserved_bytes; }

  // The class a request of `bytes` is rounded to on this allocator's device: SmallBlocks's 64-byte
  // classes for cpu requests up to 1 KiB, size_class(bytes) otherwise.
  size_t class_of(size_t bytes) const;
  // Small requests are rounded to 512 B, larger ones to 1/8 of their power of two, which keeps
  // the waste under 12.5% while letting repeated training steps hit the same classes.
  static size_t size_class(size_t bytes);

  explicit Allocator(Device d);  // throws naming `d` when its device is not built in
  ~Allocator();

 private:
  void* device_malloc(size_t bytes);  // nullptr when the device is out of memory
  void device_free(void* p);
  DeviceEvents::Stream current_stream() const;
  void empty_cache_locked();
  struct Pool;
  void* adopt_cached_block(uint64_t pool_id, Pool& pool, size_t size);  // nullptr: none
  uint64_t scoped_pool() const;  // this thread's PoolScope pool on this allocator, or 0
  bool exact_sizes() const;      // emu with red zones (or planned so on meta): no classes, no cache
  // The class of a request served by the general free lists: the planned small-block class on
  // meta under PlannedClasses, else size_class.
  size_t general_class(size_t bytes) const;
  bool small_block(size_t bytes) const {  // served by small_ (cpu only: small_host_blocks)
    return small_blocks_ && SmallBlocks::serves(bytes);
  }
  void* allocate_small(size_t bytes);

  Device device_;
  const DeviceRuntime* runtime_;   // device_'s (engine/device_runtime.h)
  bool small_blocks_;              // its capabilities' small_host_blocks
  mutable WordMutex mu_;           // taken twice per eager op (allocate, release): a one-word lock
  FreeBlocks<DeviceEvents> free_;  // size class -> cached blocks, tagged with their stream
  SmallBlocks small_;              // cpu's blocks of up to 1 KiB
  AllocatorStats stats_;
  std::unordered_set<void*> uncached_;  // live exact-size blocks (exact_sizes() when allocated)
  SizeClasses planned_;                 // meta under PlannedClasses: the planned device's rounding
  std::unordered_map<void*, size_t> planned_small_;  // live meta blocks of a planned small class
  struct Pool {
    explicit Pool(const DeviceRuntime* runtime) : free(DeviceEvents{runtime}) {}
    FreeBlocks<DeviceEvents> free;
    int64_t reserved_bytes = 0;
  };
  std::map<uint64_t, Pool> pools_;
  std::unordered_map<void*, uint64_t> pool_of_;  // block -> the pool that owns it
  uint64_t next_pool_ = 1;
};

}  // namespace glass
