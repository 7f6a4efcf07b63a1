#include "engine/allocator.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <map>
#include <memory>

#include "engine/device_memory.h"
#include "engine/device_runtime.h"
#include "engine/error.h"
#include "engine/launch.h"
#include "engine/log.h"
#include "engine/out_of_memory.h"

namespace glass {

namespace {
// The error for a request of `size` bytes that nothing could serve, with the figures from before
// the cache was given back; the rest comes from the launch context (engine/out_of_memory.h).
[[noreturn]] void out_of_memory(Device device, size_t size, int64_t allocated,
                                int64_t reserved_before, size_t largest_free) {
  OutOfMemoryFigures figures;
  figures.device = device;
  figures.request_bytes = static_cast<int64_t>(size);
  figures.allocated_bytes = allocated;
  figures.reserved_bytes = reserved_before;
  figures.largest_free_block = static_cast<int64_t>(largest_free);
  figures.free = device_memory(device);
  throw_out_of_memory(figures);
}

// The allocators of devices 0..kIndexedAllocators-1 of each kind, read without a lock; higher
// indices are in a map under a mutex.
constexpr int kIndexedAllocators = 16;
std::atomic<Allocator*> indexed_allocators[kDeviceKinds][kIndexedAllocators];
}  // namespace

DeviceEvents::Event DeviceEvents::record(Stream stream) { return runtime->record_event(stream); }
bool DeviceEvents::done(Event event) { return runtime->event_done(event); }
void DeviceEvents::release(Event event) { runtime->release_event(event); }

Allocator::Allocator(Device d)
    : device_(d),
      runtime_(&runtime_for(d)),
      small_blocks_(runtime_->capabilities().small_host_blocks),
      free_(DeviceEvents{runtime_}) {}

// One per device, never destroyed: at exit a device's own runtime (the emulator's registry of
// allocations, the CUDA context) may already be gone, and tensors kept in statics (cuBLAS
// workspaces) outlive any static allocator.
Allocator& Allocator::for_device(Device d) {
  const DeviceRuntime& runtime = runtime_for(d);  // names the device when it is not built in
  runtime.require(d);  // cuda: the one clear error line when there is no such GPU; makes it current
  const bool indexed = d.index >= 0 && d.index < kIndexedAllocators;
  std::atomic<Allocator*>* slot =
      indexed ? &indexed_allocators[static_cast<size_t>(d.kind)][d.index] : nullptr;
  if (slot != nullptr)
    if (Allocator* a = slot->load(std::memory_order_acquire)) return *a;
  static std::mutex mu;
  static auto* others = new std::map<std::pair<int, int>, Allocator*>;
  const std::lock_guard lock(mu);
  if (slot != nullptr) {
    Allocator* a = slot->load(std::memory_order_relaxed);
    if (a == nullptr) {
      a = new Allocator(d);
      slot->store(a, std::memory_order_release);
    }
    return *a;
  }
  Allocator*& a = (*others)[{static_cast<int>(d.kind), d.index}];
  if (a == nullptr) a = new Allocator(d);
  return *a;
}

// cpu has no current device to select: its allocator comes straight from the table. Any other
// device goes through for_device, which makes `d` current (cuda tags a freed block with the stream
// of the current device).
Allocator& Allocator::serving(Device d) {
  if (d.kind == DeviceKind::cpu && d.index >= 0 && d.index < kIndexedAllocators)
    if (Allocator* a = indexed_allocators[static_cast<size_t>(d.kind)][d.index].load(
            std::memory_order_acquire))
      return *a;
  return for_device(d);
}

size_t Allocator::size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= (size_t{1} << 20)) return (bytes + 511) / 512 * 512;
  const size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

size_t SizeClasses::of(size_t bytes) const {
  if (exact) return bytes;
  return small_blocks && SmallBlocks::serves(bytes) ? SmallBlocks::size_class(bytes)
                                                    : Allocator::size_class(bytes);
}

SizeClasses SizeClasses::of_device(Device d) {
  const DeviceRuntime& runtime = runtime_for(d);
  return {.exact = runtime.exact_sizes(), .small_blocks = runtime.capabilities().small_host_blocks};
}

size_t Allocator::class_of(size_t bytes) const {
  return small_block(bytes) ? SmallBlocks::size_class(bytes) : general_class(bytes);
}

size_t Allocator::general_class(size_t bytes) const {
  return planned_.small_blocks && SmallBlocks::serves(bytes) ? SmallBlocks::size_class(bytes)
                                                             : size_class(bytes);
}

Allocator::PlannedClasses::PlannedClasses(Allocator& meta, SizeClasses classes)
    : meta_(meta), saved_(meta.planned_) {
  GLASS_CHECK(meta.device_.kind == DeviceKind::meta,
              "Allocator on {}: only meta plans another device's size classes", meta.device_.str());
  const std::lock_guard lock(meta.mu_);
  meta.planned_ = classes;
}

Allocator::PlannedClasses::~PlannedClasses() {
  const std::lock_guard lock(meta_.mu_);
  meta_.planned_ = saved_;
}

// The device's own memory (engine/device_runtime.h): nullptr when it is out of memory.
void* Allocator::device_malloc(size_t bytes) { return runtime_->device_malloc(device_, bytes); }

void Allocator::device_free(void* p) { runtime_->device_free(device_, p); }

DeviceEvents::Stream Allocator::current_stream() const { return runtime_->current_stream(); }

bool Allocator::exact_sizes() const { return planned_.exact || runtime_->exact_sizes(); }

namespace {
// PoolScope: the allocator and pool this thread's requests go to (one scope per thread at a time).
thread_local const Allocator* scope_allocator = nullptr;
thread_local uint64_t scope_pool = 0;
}  // namespace

Allocator::PoolScope::PoolScope(Allocator& allocator, uint64_t pool)
    : saved_allocator_(scope_allocator), saved_pool_(scope_pool) {
  {
    std::lock_guard lock(allocator.mu_);
    GLASS_CHECK(allocator.pools_.count(pool) != 0, "Allocator on {}: no memory pool {}",
                allocator.device_.str(), pool);
  }
  scope_allocator = &allocator;
  scope_pool = pool;
}

Allocator::PoolScope::~PoolScope() {
  scope_allocator = saved_allocator_;
  scope_pool = saved_pool_;
}

uint64_t Allocator::scoped_pool() const { return scope_allocator == this ? scope_pool : 0; }

uint64_t Allocator::create_pool() {
  std::lock_guard lock(mu_);
  const uint64_t id = next_pool_++;
  pools_.try_emplace(id, runtime_);
  return id;
}

void Allocator::release_pool(uint64_t pool) {
  std::lock_guard lock(mu_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  // Free blocks join the shared cache with their stream tags (the graph's stream: other streams
  // take them only once its queued replays are done); live ones are the shared cache's from now.
  it->second.free.drain([&](void* p, size_t cls) {
    free_.put(cls, p, current_stream());
    stats_.in_use_bytes -= static_cast<int64_t>(cls);
  });
  stats_.pool_reserved_bytes -= it->second.reserved_bytes;
  pools_.erase(it);
  std::erase_if(pool_of_, [&](const auto& entry) { return entry.second == pool; });
}

std::vector<void*> Allocator::pool_blocks(uint64_t pool) const {
  std::lock_guard lock(mu_);
  std::vector<void*> blocks;
  for (const auto& [p, owner] : pool_of_)
    if (owner == pool) blocks.push_back(p);
  return blocks;
}

// A pool's miss first takes a block of the shared cache freed on this thread's stream (the eager
// warm-up step's working memory, before a capture): the pool owns it from now on. Work queued on
// the stream before the block was freed runs before anything the capture records on that stream,
// so no event is needed (and a capture may not query one). Without this, the capture would take
// fresh memory for all of the step while the warm-up's blocks sat unused in the shared cache:
// the step's working memory reserved twice.
void* Allocator::adopt_cached_block(uint64_t pool_id, Pool& pool, size_t size) {
  void* p = free_.take(size, current_stream(), /*same_stream_only=*/true);
  if (p == nullptr) return nullptr;
  pool_of_[p] = pool_id;
  pool.reserved_bytes += static_cast<int64_t>(size);
  stats_.pool_reserved_bytes += static_cast<int64_t>(size);
  return p;
}

// A cpu block of up to 1 KiB: a free block of its class, or one cut from a slab (a new slab is
// the device malloc here: 64 KiB more reserved).
void* Allocator::allocate_small(size_t bytes) {
  const size_t size = SmallBlocks::size_class(bytes);
  std::lock_guard lock(mu_);
  stats_.alloc_count++;
  bool new_slab = false;
  void* p = small_.take(bytes, new_slab);
  if (p == nullptr) {  // no memory for a new slab: give the cached blocks back and try once more
    const int64_t reserved_before = stats_.reserved_bytes;
    const size_t largest_free = free_.largest();
    empty_cache_locked();
    p = small_.take(bytes, new_slab);
    // Still nothing: the same error as any other tensor's (engine/out_of_memory.h).
    if (p == nullptr)
      out_of_memory(device_, size, stats_.allocated_bytes, reserved_before, largest_free);
  }
  if (new_slab) {
    stats_.device_malloc_count++;
    stats_.reserved_bytes += static_cast<int64_t>(SmallBlocks::kSlabBytes);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  } else {
    stats_.cache_hits++;
  }
  stats_.allocated_bytes += static_cast<int64_t>(size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.in_use_bytes += static_cast<int64_t>(size);
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return p;
}

void* Allocator::allocate(size_t bytes) {
  if (small_block(bytes)) return allocate_small(bytes);
  // With emu's red zones every tensor gets its own allocation of exactly its size, so that the
  // zone starts at its last byte: one element too far is caught, not lost in a size class.
  std::lock_guard lock(mu_);
  const bool exact = exact_sizes();
  const size_t size = exact ? bytes : general_class(bytes);
  const uint64_t pool_id = exact ? 0 : scoped_pool();
  Pool* pool = pool_id != 0 ? &pools_.at(pool_id) : nullptr;
  stats_.alloc_count++;
  // A pool serves a capture: of its free blocks only those freed on this stream, because one
  // freed on another stream of the capture could be reused safely only after an event query
  // (FreeBlocks::take), which a capture refuses, and nothing in the graph orders the two uses.
  void* p = exact  ? nullptr
            : pool ? pool->free.take(size, current_stream(), /*same_stream_only=*/true)
                   : free_.take(size, current_stream());
  // In use from now: every block but one from the pool's own free list (in use already, the
  // pool's); a block the pool adopts from the shared cache below was free until now.
  if (p == nullptr || pool == nullptr) stats_.in_use_bytes += static_cast<int64_t>(size);
  if (p == nullptr && pool != nullptr) p = adopt_cached_block(pool_id, *pool, size);
  if (p != nullptr) {
    stats_.cache_hits++;
  } else {
    // On cuda during a capture: cudaMalloc in relaxed mode (engine/cuda/memory.cpp), which a
    // capture permits; the block is the pool's, outside the graph's nodes.
    p = device_malloc(size);
    size_t largest_free = 0;
    const int64_t reserved_before = stats_.reserved_bytes;
    if (p == nullptr && pool == nullptr) {
      // Out of memory: give the cached blocks back and try once more (not during a capture:
      // cudaFree is not permitted then).
      largest_free = free_.largest();
      empty_cache_locked();
      p = device_malloc(size);
    }
    // Still nothing: the error names the tensor, op and module and the remedies
    // (engine/out_of_memory.h).
    if (p == nullptr)
      out_of_memory(device_, size, stats_.allocated_bytes, reserved_before, largest_free);
    stats_.device_malloc_count++;
    stats_.reserved_bytes += static_cast<int64_t>(size);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    if (exact) uncached_.insert(p);
    if (pool != nullptr) {
      pool_of_[p] = pool_id;
      pool->reserved_bytes += static_cast<int64_t>(size);
      stats_.pool_reserved_bytes += static_cast<int64_t>(size);
    }
  }
  if (!exact && size != size_class(bytes)) planned_small_[p] = size;
  stats_.allocated_bytes += static_cast<int64_t>(size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return p;
}

void Allocator::release(void* ptr, size_t bytes) {
  std::lock_guard lock(mu_);
  if (small_block(bytes)) {
    small_.give(ptr, bytes);
    stats_.allocated_bytes -= static_cast<int64_t>(SmallBlocks::size_class(bytes));
    stats_.in_use_bytes -= static_cast<int64_t>(SmallBlocks::size_class(bytes));
    return;
  }
  if (uncached_.erase(ptr) != 0) {  // an exact-size block goes straight back (its zones checked)
    stats_.allocated_bytes -= static_cast<int64_t>(bytes);
    stats_.reserved_bytes -= static_cast<int64_t>(bytes);
    stats_.in_use_bytes -= static_cast<int64_t>(bytes);
    try {
      device_free(ptr);
    } catch (const std::exception& e) {
      // Called from a tensor's destructor, which must not throw: a red zone that host code (not
      // a kernel: those are checked after every launch) overwrote is reported here.
      log().error("{}", e.what());
    }
    return;
  }
  size_t cls = size_class(bytes);
  if (!planned_small_.empty())  // meta: a block planned in cpu's small classes keeps its class
    if (auto it = planned_small_.find(ptr); it != planned_small_.end()) {
      cls = it->second;
      planned_small_.erase(it);
    }
  stats_.allocated_bytes -= static_cast<int64_t>(cls);
  runtime_->check_block_release(ptr, cls, current_stream());
  // A block freed inside a pool's scope becomes that pool's, wherever it came from; a pool's
  // block freed outside returns to its pool.
  uint64_t pool_id = scoped_pool();
  if (pool_id != 0) {
    auto [it, fresh] = pool_of_.try_emplace(ptr, pool_id);
    if (fresh || it->second != pool_id) {  // the shared cache's (or another pool's) until now
      if (!fresh) pools_.at(it->second).reserved_bytes -= static_cast<int64_t>(cls);
      if (fresh) stats_.pool_reserved_bytes += static_cast<int64_t>(cls);
      it->second = pool_id;
      pools_.at(pool_id).reserved_bytes += static_cast<int64_t>(cls);
    }
  } else if (auto it = pool_of_.find(ptr); it != pool_of_.end()) {
    pool_id = it->second;
  }
  // Into a pool's free list it stays in use (the graph's); into the shared cache it is free.
  if (pool_id == 0) stats_.in_use_bytes -= static_cast<int64_t>(cls);
  (pool_id != 0 ? pools_.at(pool_id).free : free_).put(cls, ptr, current_stream());
}

AllocatorStats Allocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Allocator::reset_peaks() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
}

void Allocator::restore_peaks(const AllocatorStats& before) {
  std::lock_guard lock(mu_);
  stats_.peak_allocated_bytes = std::max(before.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.peak_reserved_bytes = std::max(before.peak_reserved_bytes, stats_.reserved_bytes);
  stats_.peak_in_use_bytes = std::max(before.peak_in_use_bytes, stats_.in_use_bytes);
}

void Allocator::empty_cache() {
  std::lock_guard lock(mu_);
  empty_cache_locked();
}

void Allocator::empty_cache_locked() {
  free_.drain([&](void* p, size_t cls) {
    device_free(p);
    stats_.reserved_bytes -= static_cast<int64_t>(cls);
  });
  stats_.reserved_bytes -= static_cast<int64_t>(small_.release_empty_slabs());
}

Allocator::~Allocator() {
  for (auto& [id, pool] : pools_) pool.free.drain([&](void* p, size_t) { device_free(p); });
  free_.drain([&](void* p, size_t) { device_free(p); });
}

}  // namespace glass
