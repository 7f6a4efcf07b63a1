#include "engine/emu/event.h"

#include "engine/emu/error.h"

namespace glass::emu {

float Event::elapsed_ms(const Event& start, const Event& end) {
  if (!start.recorded() || !end.recorded())
    throw EmuError("Event::elapsed_ms: both events must have been recorded");
  return std::chrono::duration<float, std::milli>(*end.time_ - *start.time_).count();
}

}  // namespace glass::emu
