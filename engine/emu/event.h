// Events on emu. A launch has finished when launch_kernel returns, so every stream is an in-order
// queue that is always empty: an event completes the moment it is recorded, and recording it
// takes the host time. Streams themselves need no state here.
#pragma once

#include <chrono>
#include <optional>

namespace glass::emu {

class Event {
 public:
  // cudaEventRecord: everything launched before has finished, so this marks "now".
  void record() { time_ = std::chrono::steady_clock::now(); }
  bool recorded() const { return time_.has_value(); }
  // cudaEventElapsedTime: milliseconds from `start` to `end`; throws EmuError unless both have
  // been recorded.
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  std::optional<std::chrono::steady_clock::time_point> time_;
};

}  // namespace glass::emu
