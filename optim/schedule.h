// Learning-rate schedules: the learning rate as a pure function of the step (0-based), so that a
// resumed run gets exactly the rates of an uninterrupted one.
//
// Warmup (both kinds), steps 0 .. warmup-1:  lr(step) = max_lr * (step + 1) / warmup
//   (the first step already trains; step warmup-1 reaches max_lr).
// constant, after warmup:                      lr(step) = max_lr
// cosine, after warmup (nanoGPT's decay to min_lr over the rest of the run):
//   progress = (step - warmup) / (total_steps - warmup), clamped to [0, 1]
//   lr(step) = min_lr + 0.5 * (1 + cos(pi * progress)) * (max_lr - min_lr)
// so the step right after warmup gets max_lr and step total_steps (and later) gets min_lr.
// min_lr defaults to max_lr / 10.
#pragma once

#include <cstdint>
#include <string>

namespace glass {

struct LrSchedule {
  enum class Kind { constant, cosine };
  Kind kind = Kind::constant;
  double max_lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // cosine: the step at which min_lr is reached

  static LrSchedule constant(double lr, int64_t warmup_steps = 0);
  static LrSchedule cosine(double max_lr, int64_t warmup_steps, int64_t total_steps,
                           double min_lr = -1 /* max_lr / 10 */);
  // "constant" or "cosine" (as the --lr-schedule flag), else an error listing both.
  static LrSchedule parse(const std::string& kind, double lr, int64_t warmup_steps,
                          int64_t total_steps);

  double at(int64_t step) const;
};

}  // namespace glass
