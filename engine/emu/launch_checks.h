// GLASS_EMU_RACECHECK and GLASS_EMU_INITCHECK: checks that rerun a launch and compare results.
//
// Both work on the device allocations a kernel can reach: those its pointer arguments point
// into, or every live allocation when an argument is a struct (which may hold pointers). A
// launch through a lambda body, or one with a writable pointer outside every device allocation
// (host memory), cannot be rerun safely and is run once, unchecked.
//
// Race check: the grid runs under kRaceOrders thread orders (the configured one, the reverse
// order, then shuffled ones) from a snapshot of the reachable memory; blocks run one after another.
// When the results differ, the grid is run again under the two orders that disagree, watching the
// first differing address after each block: the first block after which it differs is named.
//
// Init check: fresh allocations hold kNeverWrittenWord (memory.h). Before a launch, the words of
// reachable memory that still hold it are the never-written ones. The launch runs once as it
// is, and once more with a different value (one per word) in them: if anything the kernel wrote
// differs, its results depend on memory nobody wrote, and a bisection over those words finds
// one that matters. Reads whose value does not change the results (a value read and
// discarded, or hidden by a max or a multiplication by zero) are not reported.
//
// After a clean check the memory holds the results of the configured order, as if run once.
#pragma once

#include <vector_types.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "engine/emu/launch.h"

namespace glass::emu::detail {

// The order in which a block's threads start and resume after barriers: shuffled by a seed, or
// without one, natural (index order) or reversed.
struct ThreadOrder {
  std::optional<uint64_t> shuffle_seed;
  bool reversed = false;
};

// Runs the whole grid once under `order`, blocks one after another on the calling thread,
// calling after_block(linear block index) after each.
using SerialGridRun = std::function<void(ThreadOrder order, const std::function<void(uint64_t)>&)>;

// Both throw EmuError naming the kernel when the check finds something, and whatever `run`
// throws. The race check compares `configured` with the reverse order and with kRaceOrders - 2
// shuffled orders.
constexpr int kRaceOrders = 4;
void race_checked_run(const char* kernel, dim3 grid, const KernelArguments& arguments,
                      ThreadOrder configured, const SerialGridRun& run);
void init_checked_run(const char* kernel, const KernelArguments& arguments,
                      const std::function<void()>& run);

}  // namespace glass::emu::detail
