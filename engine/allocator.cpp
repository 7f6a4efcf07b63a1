#include "engine/allocator.h"

#include <bit>
#include <cstdlib>

#include "engine/error.h"
#if defined(GLASS_HAS_EMU)
#include "engine/emu/memory.h"
#endif

namespace glass {

Allocator& Allocator::for_device(Device d) {
  switch (d.kind) {
    case DeviceKind::cpu: {
      static Allocator cpu(kCPU);
      return cpu;
    }
    case DeviceKind::emu: {
#if defined(GLASS_HAS_EMU)
      // Never destroyed: at exit the emulator's own registry of allocations may already be gone.
      static Allocator* emu = new Allocator(kEmu);
      return *emu;
#else
      break;
#endif
    }
  }
  fail("Allocator: no allocator for device {}", d.str());
}

size_t Allocator::size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= (size_t{1} << 20)) return (bytes + 511) / 512 * 512;
  const size_t step = std::bit_floor(bytes) / 8;
  return (bytes + step - 1) / step * step;
}

void* Allocator::device_malloc(size_t bytes) {
  void* p = nullptr;
  switch (device_.kind) {
    case DeviceKind::cpu:
      // 64-byte alignment: a cache line, and what AVX-512 loads like.
      p = std::aligned_alloc(64, bytes);
      break;
    case DeviceKind::emu:
#if defined(GLASS_HAS_EMU)
      // Host memory behind a device pointer: 256-byte aligned like cudaMalloc, fresh bytes 0xFF,
      // red zones with GLASS_EMU_CHECK=1. It throws on failure; report it like the cpu case.
      try {
        p = glass::emu::device_malloc(bytes);
      } catch (const std::exception&) {
        p = nullptr;
      }
#endif
      break;
  }
  GLASS_CHECK(p != nullptr, "Allocator: out of memory on {} allocating {} bytes ({} reserved)",
              device_.str(), bytes, stats_.reserved_bytes);
  return p;
}

void Allocator::device_free(void* p) {
  switch (device_.kind) {
    case DeviceKind::cpu:
      std::free(p);
      return;
    case DeviceKind::emu:
#if defined(GLASS_HAS_EMU)
      glass::emu::device_free(p);
#endif
      return;
  }
}

void* Allocator::allocate(size_t bytes) {
  const size_t cls = size_class(bytes);
  std::lock_guard lock(mu_);
  stats_.alloc_count++;
  void* p = nullptr;
  auto it = free_.find(cls);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    stats_.cache_hits++;
  } else {
    p = device_malloc(cls);
    stats_.device_malloc_count++;
    stats_.reserved_bytes += static_cast<int64_t>(cls);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  stats_.allocated_bytes += static_cast<int64_t>(cls);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return p;
}

void Allocator::release(void* ptr, size_t bytes) {
  const size_t cls = size_class(bytes);
  std::lock_guard lock(mu_);
  stats_.allocated_bytes -= static_cast<int64_t>(cls);
  free_[cls].push_back(ptr);
}

AllocatorStats Allocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Allocator::reset_peaks() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void Allocator::empty_cache() {
  std::lock_guard lock(mu_);
  for (auto& [cls, blocks] : free_) {
    for (void* p : blocks) device_free(p);
    stats_.reserved_bytes -= static_cast<int64_t>(cls * blocks.size());
    blocks.clear();
  }
}

Allocator::~Allocator() {
  for (auto& [cls, blocks] : free_)
    for (void* p : blocks) device_free(p);
}

}  // namespace glass
