// Logging through spdlog: one logger named "glass", level from GLASS_LOG (trace..off, default
// info).
#pragma once

#include <spdlog/spdlog.h>

namespace glass {
spdlog::logger& log();
}  // namespace glass
