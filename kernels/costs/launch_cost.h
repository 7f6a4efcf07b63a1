// What one launch of a kernel costs: the FLOPs it must do and the bytes it must move (ideal, each
// operand touched once), the two numbers a LaunchInfo carries (engine/launch.h) and the roofline
// reads. Each kernel's cost is written once, in kernels/costs/<family>.h, and both devices'
// launchers report it: the cpu kernel and the CUDA host launcher count the same work. Where a
// device's algorithm really moves more (a second pass over partial sums, tiles loaded again), its
// launcher adds that term itself, and the family's header says what and why.
#pragma once

namespace glass::kernels {

struct LaunchCost {
  double flops = 0;
  double bytes = 0;
};

}  // namespace glass::kernels
