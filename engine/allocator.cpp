#include "engine/allocator.h"

#include <bit>
#include <cstdlib>
#include <map>
#include <memory>

#include "engine/error.h"
#include "engine/launch.h"
#include "engine/log.h"
#if defined(GLASS_HAS_EMU)
#include "engine/emu/memory.h"
#include "engine/emu/settings.h"
#endif
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/memory.h"
#include "engine/cuda/runtime.h"
#include "engine/cuda/stream.h"
#endif

namespace glass {

#if defined(GLASS_HAS_CUDA)
// An engine/cuda Event on the heap, behind the opaque pointer.
DeviceEvents::Event DeviceEvents::record(Stream stream) {
  auto event = std::make_unique<cuda::Event>();
  event->record(static_cast<cudaStream_t>(stream));
  return event.release();
}

bool DeviceEvents::done(Event event) { return static_cast<cuda::Event*>(event)->done(); }

void DeviceEvents::release(Event event) { delete static_cast<cuda::Event*>(event); }
#else
namespace {
[[noreturn]] void no_cuda() { fail("Allocator: this build of glass has no CUDA runtime"); }
}  // namespace
DeviceEvents::Event DeviceEvents::record(Stream) { no_cuda(); }
bool DeviceEvents::done(Event) { no_cuda(); }
void DeviceEvents::release(Event) { no_cuda(); }
#endif

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
    case DeviceKind::cuda: {
#if defined(GLASS_HAS_CUDA)
      cuda::require_device(d.index);  // the one clear error line when there is no such GPU
      // One per GPU, never destroyed: at exit the CUDA context may already be gone.
      static std::mutex mu;
      static auto* gpus = new std::map<int, Allocator*>;
      const std::lock_guard lock(mu);
      Allocator*& a = (*gpus)[d.index];
      if (a == nullptr) a = new Allocator(d);
      return *a;
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
  switch (device_.kind) {
    case DeviceKind::cpu:
      // 64-byte alignment: a cache line, and what AVX-512 loads like.
      return std::aligned_alloc(64, bytes);
    case DeviceKind::emu:
#if defined(GLASS_HAS_EMU)
      // Host memory behind a device pointer: 256-byte aligned like cudaMalloc, fresh bytes 0xFF,
      // red zones with GLASS_EMU_CHECK=1. It throws on failure; report it like the cpu case.
      try {
        return glass::emu::device_malloc(bytes);
      } catch (const std::exception&) {
        return nullptr;
      }
#else
      break;
#endif
    case DeviceKind::cuda:
#if defined(GLASS_HAS_CUDA)
      return cuda::device_malloc(bytes);
#else
      break;
#endif
  }
  return nullptr;
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
    case DeviceKind::cuda:
#if defined(GLASS_HAS_CUDA)
      cuda::device_free(p);
#endif
      return;
  }
}

DeviceEvents::Stream Allocator::current_stream() const {
#if defined(GLASS_HAS_CUDA)
  if (device_.kind == DeviceKind::cuda) return cuda::current_stream();
#endif
  return nullptr;
}

bool Allocator::exact_sizes() const {
#if defined(GLASS_HAS_EMU)
  return device_.kind == DeviceKind::emu && glass::emu::settings().check_memory;
#else
  return false;
#endif
}

void* Allocator::allocate(size_t bytes) {
  // With emu's red zones every tensor gets its own allocation of exactly its size, so that the
  // zone starts at its last byte: one element too far is caught, not lost in a size class.
  const bool exact = exact_sizes();
  const size_t size = exact ? bytes : size_class(bytes);
  std::lock_guard lock(mu_);
  stats_.alloc_count++;
  void* p = exact ? nullptr : free_.take(size, current_stream());
  if (p != nullptr) {
    stats_.cache_hits++;
  } else {
    if (device_.kind == DeviceKind::cuda && capturing_graph())
      refuse_in_graph_capture(device_, fmt::format("a new allocation of {} bytes", size).c_str(),
                              "cudaMalloc cannot be captured; run the step eagerly first, so "
                              "that the allocator's cache holds every block the step takes");
    p = device_malloc(size);
    if (p == nullptr) {  // out of memory: give the cached blocks back and try once more
      empty_cache_locked();
      p = device_malloc(size);
    }
    GLASS_CHECK(p != nullptr,
                "Allocator: out of memory on {} allocating {} bytes ({} allocated, {} reserved)",
                device_.str(), size, stats_.allocated_bytes, stats_.reserved_bytes);
    stats_.device_malloc_count++;
    stats_.reserved_bytes += static_cast<int64_t>(size);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    if (exact) uncached_.insert(p);
  }
  stats_.allocated_bytes += static_cast<int64_t>(size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return p;
}

void Allocator::release(void* ptr, size_t bytes) {
  std::lock_guard lock(mu_);
  if (uncached_.erase(ptr) != 0) {  // an exact-size block goes straight back (its zones checked)
    stats_.allocated_bytes -= static_cast<int64_t>(bytes);
    stats_.reserved_bytes -= static_cast<int64_t>(bytes);
    try {
      device_free(ptr);
    } catch (const std::exception& e) {
      // Called from a tensor's destructor, which must not throw: a red zone that host code (not
      // a kernel: those are checked after every launch) overwrote is reported here.
      log().error("{}", e.what());
    }
    return;
  }
  const size_t cls = size_class(bytes);
  stats_.allocated_bytes -= static_cast<int64_t>(cls);
#if defined(GLASS_HAS_CUDA)
  if (device_.kind == DeviceKind::cuda) cuda::check_block_release(ptr, cls, current_stream());
#endif
  free_.put(cls, ptr, current_stream());
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
  empty_cache_locked();
}

void Allocator::empty_cache_locked() {
  free_.drain([&](void* p, size_t cls) {
    device_free(p);
    stats_.reserved_bytes -= static_cast<int64_t>(cls);
  });
}

Allocator::~Allocator() {
  free_.drain([&](void* p, size_t) { device_free(p); });
}

}  // namespace glass
