// The device entry points that are not on a hot path; sync_block lives with the block barrier
// and the warp operations with theirs, so that the scheduler code inlines into them.
#include "engine/emu/device_runtime.h"

#include <string>

#include "engine/emu/block_scheduler.h"
#include "engine/emu/describe.h"
#include "engine/emu/error.h"

namespace glass::emu::detail {

void called_outside_kernel(const char* what, Site site) {
  throw EmuError(std::string(what) + " called outside a kernel launch at " + describe(site));
}

unsigned active_mask() { return running_scheduler("__activemask()", Site::here()).active_mask(); }

void* dynamic_shared_memory() {
  return running_scheduler("dynamic shared memory", Site::here()).dynamic_shared();
}

void trap(Site site) { throw EmuError("__trap() at " + describe(site)); }

}  // namespace glass::emu::detail
