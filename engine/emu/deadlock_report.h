// The message of a deadlock: which threads wait where, so that the divergent barrier or the
// missing lane can be found from the report alone.
#pragma once

#include <span>
#include <string>

#include "engine/emu/block_scheduler.h"

namespace glass::emu::detail {

std::string deadlock_report(const LaunchJob& job, uint3 block, std::span<Fiber* const> waiting,
                            unsigned exited);

}  // namespace glass::emu::detail
