#include "engine/emu/memory.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "engine/emu/error.h"
#include "engine/emu/settings.h"

namespace glass::emu {
namespace {

constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees
constexpr size_t kRedZone = 256;    // before every checked allocation, and at least after it
constexpr unsigned char kZoneByte = 0xFD;
constexpr int kFreshByte = 0xFF;

struct Allocation {
  std::byte* raw;
  size_t bytes;
  size_t before;  // red zone bytes before the user's first byte (0: unchecked)
  size_t after;   // red zone bytes after the user's last byte
  uint64_t serial;
  int memory;      // the budget it counts against (gpu_memory.h)
  size_t counted;  // bytes it counts there: `bytes` rounded up to 256
};

struct Registry {
  std::mutex mutex;
  std::map<std::byte*, Allocation> live;  // by user pointer
  uint64_t allocations = 0;
  std::map<int, size_t> in_use;  // memory (gpu_memory.h) -> bytes counted against it
};

Registry& registry() {
  // Never destroyed: emulated-GPU stream workers may still run while static destructors do.
  static Registry& r = *new Registry;
  return r;
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::string address(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// "" when the zone [p, p + n) is intact, else "[first, last]" of the bytes that changed,
// as offsets from `origin`.
std::string zone_damage(const std::byte* p, size_t n, const std::byte* origin) {
  size_t first = n, last = 0;
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<unsigned char>(p[i]) == kZoneByte) continue;
    if (first == n) first = i;
    last = i;
  }
  if (first == n) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%td, %td]", p + first - origin, p + last - origin);
  return buf;
}

// Describes what was written outside `a`, or "" if nothing was, and repairs the zones.
std::string damage(std::byte* user, const Allocation& a) {
  if (a.before == 0) return "";
  std::string below = zone_damage(user - a.before, a.before, user);
  std::string above = zone_damage(user + a.bytes, a.after, user);
  if (below.empty() && above.empty()) return "";
  std::memset(user - a.before, kZoneByte, a.before);
  std::memset(user + a.bytes, kZoneByte, a.after);
  std::string msg = "allocation #" + std::to_string(a.serial) + " (" + std::to_string(a.bytes) +
                    " bytes at " + address(user) + ") was written";
  if (!below.empty()) msg += " before its start at byte offsets " + below;
  if (!below.empty() && !above.empty()) msg += " and";
  if (!above.empty()) msg += " past its end at byte offsets " + above;
  return msg;
}

}  // namespace

void* device_malloc(size_t bytes, int memory) {
  const bool checked = settings().check_memory;
  const size_t body = round_up(bytes == 0 ? 1 : bytes, kAlignment);
  const size_t limit = gpu_memory_bytes();
  Registry& r = registry();
  {
    // Taken now, so that two threads cannot both fit in the last bytes; given back on failure.
    std::lock_guard lock(r.mutex);
    size_t& used = r.in_use[memory];
    if (body > limit - std::min(used, limit))
      throw OutOfDeviceMemory("device_malloc: out of memory allocating " + std::to_string(bytes) +
                              " bytes: " + std::to_string(used) + " of the emulated GPU's " +
                              std::to_string(limit) + " bytes in use (GLASS_EMU_GPU_MEMORY)");
    used += body;
  }
  const size_t before = checked ? kRedZone : 0;
  const size_t total = before + body + (checked ? kRedZone : 0);
  auto* raw = static_cast<std::byte*>(std::aligned_alloc(kAlignment, total));
  if (!raw) {
    std::lock_guard lock(r.mutex);
    r.in_use[memory] -= body;
    throw OutOfDeviceMemory("device_malloc: out of memory allocating " + std::to_string(bytes) +
                            " bytes: the host has no more memory");
  }
  std::byte* user = raw + before;
  if (settings().init_check) {
    for (size_t i = 0; i < bytes; i += 4)
      std::memcpy(user + i, &detail::kNeverWrittenWord, std::min<size_t>(4, bytes - i));
  } else {
    std::memset(user, kFreshByte, bytes);
  }
  const size_t after = checked ? total - before - bytes : 0;
  if (checked) {
    std::memset(raw, kZoneByte, before);
    std::memset(user + bytes, kZoneByte, after);
  }
  std::lock_guard lock(r.mutex);
  r.live.emplace(user, Allocation{raw, bytes, before, after, ++r.allocations, memory, body});
  return user;
}

void device_free(void* p) {
  if (!p) return;
  Registry& r = registry();
  std::string bad;
  {
    std::lock_guard lock(r.mutex);
    auto it = r.live.find(static_cast<std::byte*>(p));
    if (it == r.live.end())
      throw EmuError("device_free(" + address(p) + "): not a pointer returned by device_malloc");
    bad = damage(it->first, it->second);
    r.in_use[it->second.memory] -= it->second.counted;
    std::free(it->second.raw);
    r.live.erase(it);
  }
  if (!bad.empty()) throw EmuError("device_free(" + address(p) + "): " + bad);
}

GpuMemoryInfo gpu_memory_info(int memory) {
  const size_t total = gpu_memory_bytes();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const size_t used = r.in_use[memory];
  return {total - std::min(used, total), total};
}

void check_red_zones(const char* kernel) {
  Registry& r = registry();
  std::string bad;
  {
    std::lock_guard lock(r.mutex);
    for (const auto& [user, a] : r.live) {
      std::string d = damage(user, a);
      if (!d.empty()) bad += "\n  " + d;
    }
  }
  if (!bad.empty())
    throw EmuError("kernel '" + std::string(kernel) + "' wrote outside device memory:" + bad);
}

namespace detail {

std::optional<AllocationView> find_allocation(const void* p) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto* b = static_cast<std::byte*>(const_cast<void*>(p));
  auto it = r.live.upper_bound(b);
  if (it == r.live.begin()) return std::nullopt;
  --it;
  if (b >= it->first + std::max<size_t>(it->second.bytes, 1)) return std::nullopt;
  return AllocationView{it->first, it->second.bytes, it->second.serial};
}

std::vector<AllocationView> live_allocations() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<AllocationView> out;
  out.reserve(r.live.size());
  for (const auto& [user, a] : r.live) out.push_back({user, a.bytes, a.serial});
  return out;
}

}  // namespace detail
}  // namespace glass::emu
