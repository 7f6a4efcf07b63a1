#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/error.h"

namespace glass {

LrSchedule LrSchedule::constant(double lr, int64_t warmup_steps) {
  GLASS_CHECK(lr >= 0 && warmup_steps >= 0, "LrSchedule: lr {} and warmup {} must be >= 0", lr,
              warmup_steps);
  return {Kind::constant, lr, lr, warmup_steps, 0};
}

LrSchedule LrSchedule::cosine(double max_lr, int64_t warmup_steps, int64_t total_steps,
                              double min_lr) {
  if (min_lr < 0) min_lr = max_lr / 10;
  GLASS_CHECK(max_lr >= 0 && min_lr <= max_lr,
              "LrSchedule: cosine needs 0 <= min_lr ({}) <= max_lr ({})", min_lr, max_lr);
  GLASS_CHECK(warmup_steps >= 0 && total_steps >= warmup_steps,
              "LrSchedule: cosine needs 0 <= warmup ({}) <= total steps ({})", warmup_steps,
              total_steps);
  return {Kind::cosine, max_lr, min_lr, warmup_steps, total_steps};
}

LrSchedule LrSchedule::parse(const std::string& kind, double lr, int64_t warmup_steps,
                             int64_t total_steps) {
  if (kind == "constant") return constant(lr, warmup_steps);
  if (kind == "cosine") return cosine(lr, warmup_steps, total_steps);
  fail("unknown learning-rate schedule '{}' (expected constant or cosine)", kind);
}

double LrSchedule::at(int64_t step) const {
  GLASS_CHECK(step >= 0, "LrSchedule::at: step {} is negative", step);
  if (step < warmup_steps)
    return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (kind == Kind::constant) return max_lr;
  const int64_t decay_steps = total_steps - warmup_steps;
  const double progress =
      decay_steps > 0
          ? std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps),
                       0.0, 1.0)
          : 1.0;
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) * (max_lr - min_lr);
}

}  // namespace glass
