#include "engine/emu/launch_checks.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/emu/atomic_targets.h"
#include "engine/emu/describe.h"
#include "engine/emu/error.h"
#include "engine/emu/memory.h"

namespace glass::emu::detail {

// The bytes atomics updated in the race check's runs of one launch (atomic_targets.h).
class AtomicTargets {
 public:
  void add(const void* p, size_t bytes) {
    const auto* b = static_cast<const std::byte*>(p);
    for (size_t i = 0; i < bytes; ++i) bytes_.insert(b + i);
  }
  bool contains(const std::byte* p) const { return bytes_.count(p) != 0; }
  bool empty() const { return bytes_.empty(); }

 private:
  std::unordered_set<const std::byte*> bytes_;
};

thread_local AtomicTargets* t_atomic_targets = nullptr;

void note_atomic_target(AtomicTargets& targets, const void* p, size_t bytes) {
  targets.add(p, bytes);
}

namespace {

// Collects what atomics update on this thread while it lives.
class CollectAtomicTargets {
 public:
  explicit CollectAtomicTargets(AtomicTargets& targets) : saved_(t_atomic_targets) {
    t_atomic_targets = &targets;
  }
  ~CollectAtomicTargets() { t_atomic_targets = saved_; }
  CollectAtomicTargets(const CollectAtomicTargets&) = delete;
  CollectAtomicTargets& operator=(const CollectAtomicTargets&) = delete;

 private:
  AtomicTargets* saved_;
};

// The allocations a launch can reach, and whether it can be rerun at all.
struct Reach {
  std::vector<AllocationView> allocations;
  bool rerunnable = true;
};

Reach reach_of(const KernelArguments& a) {
  Reach r;
  if (!a.function) {  // a lambda body: it may write anything, host memory included
    r.rerunnable = false;
    return r;
  }
  if (a.opaque) {
    r.allocations = live_allocations();
    return r;
  }
  for (const PointerArgument& p : a.pointers) {
    std::optional<AllocationView> v = find_allocation(p.pointer);
    if (!v) {
      if (p.writable) r.rerunnable = false;  // host memory: a rerun would not start afresh
      continue;
    }
    const bool seen = std::any_of(r.allocations.begin(), r.allocations.end(),
                                  [&](const AllocationView& x) { return x.serial == v->serial; });
    if (!seen) r.allocations.push_back(*v);
  }
  return r;
}

// The bytes of the reachable allocations at one moment.
using Snapshot = std::vector<std::vector<std::byte>>;

Snapshot take(const std::vector<AllocationView>& allocations) {
  Snapshot s;
  s.reserve(allocations.size());
  for (const AllocationView& a : allocations) s.emplace_back(a.base, a.base + a.bytes);
  return s;
}

void restore(const std::vector<AllocationView>& allocations, const Snapshot& s) {
  for (size_t i = 0; i < allocations.size(); ++i)
    std::memcpy(allocations[i].base, s[i].data(), allocations[i].bytes);
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

std::string where(const AllocationView& a, size_t offset) {
  return "allocation #" + std::to_string(a.serial) + " (" + std::to_string(a.bytes) + " bytes at " +
         hex(a.base) + "), byte offset " + std::to_string(offset) + " (address " +
         hex(a.base + offset) + ")";
}

std::string byte_hex(std::byte b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned>(b));
  return buf;
}

uint3 block_index(uint64_t linear, dim3 grid) {
  return uint3{static_cast<unsigned>(linear % grid.x),
               static_cast<unsigned>(linear / grid.x % grid.y),
               static_cast<unsigned>(linear / (uint64_t{grid.x} * grid.y))};
}

std::string order_name(const ThreadOrder& o) {
  if (o.shuffle_seed) return "thread order seed " + std::to_string(*o.shuffle_seed);
  return o.reversed ? "reverse thread order" : "natural thread order";
}

// SplitMix64, as the scheduler's shuffle: a seed per extra order, and a value per word.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void race_checked_run(const char* kernel, dim3 grid, const KernelArguments& arguments,
                      ThreadOrder seed, const SerialGridRun& run) {
  const Reach reach = reach_of(arguments);
  const auto nothing = [](uint64_t) {};
  if (!reach.rerunnable) return run(seed, nothing);
  const std::vector<AllocationView>& mem = reach.allocations;
  AtomicTargets atomics;
  const CollectAtomicTargets collect(atomics);
  const Snapshot start = take(mem);
  run(seed, nothing);
  const Snapshot reference = take(mem);
  for (int k = 1; k < kRaceOrders; ++k) {
    ThreadOrder other;
    if (k == 1 && !seed.shuffle_seed && !seed.reversed)
      other.reversed = true;
    else
      other.shuffle_seed = mix(seed.shuffle_seed.value_or(0x5EEDull) + static_cast<uint64_t>(k));
    restore(mem, start);
    run(other, nothing);
    // The first byte that differs from the reference, bytes that atomics updated aside.
    size_t alloc = 0, offset = 0;
    bool differs = false;
    for (; alloc < mem.size() && !differs; ++alloc) {
      const std::vector<std::byte>& ref = reference[alloc];
      const std::byte* now = mem[alloc].base;
      for (auto m = std::mismatch(ref.begin(), ref.end(), now); m.first != ref.end();
           m = std::mismatch(m.first + 1, ref.end(), m.second + 1)) {
        if (atomics.contains(m.second)) continue;
        offset = static_cast<size_t>(m.first - ref.begin());
        differs = true;
        break;
      }
    }
    if (!differs) continue;
    --alloc;
    const std::byte* watched = mem[alloc].base + offset;
    const std::byte other_value = *watched;
    // Which block makes the difference: the watched byte after each block, in both orders.
    auto trace = [&](const ThreadOrder& order) {
      std::vector<std::byte> after;
      restore(mem, start);
      run(order, [&](uint64_t) { after.push_back(*watched); });
      return after;
    };
    const std::vector<std::byte> a = trace(seed), b = trace(other);
    const size_t block = static_cast<size_t>(
        std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
    restore(mem, reference);
    std::string message = "kernel '" + std::string(kernel) + "': data race (GLASS_EMU_RACECHECK)";
    if (block < a.size()) message += " in block " + describe(block_index(block, grid));
    message += ": the result depends on the order of its threads. " + where(mem[alloc], offset) +
               " is " + byte_hex(reference[alloc][offset]) + " under " + order_name(seed) +
               " and " + byte_hex(other_value) + " under " + order_name(other) +
               ". Threads that exchange data through shared or global memory need a "
               "__syncthreads() (or __syncwarp()) between the write and the read; two threads "
               "writing one address race whatever the barriers.";
    throw EmuError(message);
  }
  // The other orders agreed, atomics' bytes aside: leave the configured order's results.
  if (!atomics.empty()) restore(mem, reference);
}

namespace {

// Whether the 4-byte word at p holds kNeverWrittenWord.
bool never_written(const std::byte* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w == kNeverWrittenWord;
}

// A value for never-written word i in the second run: a finite float in [1, 2) that differs
// per word, so a word copied elsewhere is not mistaken for one left alone.
uint32_t replacement_word(uint64_t i) {
  return 0x3F800000u | static_cast<uint32_t>(mix(i) & 0x7FFFFFu);
}

}  // namespace

void init_checked_run(const char* kernel, const KernelArguments& arguments,
                      const std::function<void()>& run) {
  const Reach reach = reach_of(arguments);
  if (!reach.rerunnable) return run();
  const std::vector<AllocationView>& mem = reach.allocations;
  // The never-written words: (allocation, byte offset).
  std::vector<std::pair<size_t, size_t>> unwritten;
  for (size_t a = 0; a < mem.size(); ++a)
    for (size_t o = 0; o + 4 <= mem[a].bytes; o += 4)
      if (never_written(mem[a].base + o)) unwritten.emplace_back(a, o);
  if (unwritten.empty()) return run();

  const Snapshot start = take(mem);
  run();
  const Snapshot reference = take(mem);

  // Runs the grid with the never-written words [lo, hi) replaced; true when anything the
  // kernel wrote differs from the reference run. A word that both runs left as it started
  // (kNeverWrittenWord in one, its replacement in the other) was not written: not a difference.
  auto differs_with_replaced = [&](size_t lo, size_t hi) {
    restore(mem, start);
    for (size_t i = lo; i < hi; ++i) {
      const uint32_t w = replacement_word(i);
      std::memcpy(mem[unwritten[i].first].base + unwritten[i].second, &w, 4);
    }
    const Snapshot initial = take(mem);
    run();
    bool differs = false;
    for (size_t a = 0; a < mem.size() && !differs; ++a) {
      const std::byte* now = mem[a].base;
      for (size_t o = 0; o < mem[a].bytes && !differs; o += 4) {
        const size_t n = std::min<size_t>(4, mem[a].bytes - o);
        if (std::memcmp(now + o, reference[a].data() + o, n) == 0) continue;
        const bool left_alone = n == 4 && never_written(start[a].data() + o) &&
                                std::memcmp(reference[a].data() + o, start[a].data() + o, 4) == 0 &&
                                std::memcmp(now + o, initial[a].data() + o, 4) == 0;
        differs = !left_alone;
      }
    }
    return differs;
  };

  size_t lo = 0, hi = unwritten.size();
  bool found = differs_with_replaced(lo, hi);
  // Bisection: narrow [lo, hi) to one word whose value changes the results, while one half
  // alone still does.
  while (found && hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (differs_with_replaced(lo, mid))
      hi = mid;
    else if (differs_with_replaced(mid, hi))
      lo = mid;
    else
      break;  // only the two halves together change the results: report the first word
  }
  restore(mem, reference);
  if (!found) return;
  const AllocationView& a = mem[unwritten[lo].first];
  throw EmuError("kernel '" + std::string(kernel) +
                 "' read device memory never written since it was allocated "
                 "(GLASS_EMU_INITCHECK): " +
                 where(a, unwritten[lo].second) +
                 "; no copy, memset, host write or kernel wrote it, and the kernel's results "
                 "depend on its value" +
                 (hi - lo > 1 ? " (together with other never-written words)" : ""));
}

}  // namespace glass::emu::detail
