#include "engine/log.h"

#include "engine/log_warning.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace glass {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("glass");
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    const char* level = std::getenv("GLASS_LOG");
    l->set_level(level ? spdlog::level::from_str(level) : spdlog::level::info);
    return l;
  }();
  return *logger;
}

void log_warning(const std::string& message) { log().warn("{}", message); }

}  // namespace glass
