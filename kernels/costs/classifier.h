// Cost of the fused classifier (kernels/kernel_list.inc: fused_classifier), shared by
// kernels/cpu/classifier.cpp and kernels/cuda/classifier.cu (kernels/costs/launch_cost.h).
#pragma once

#include "engine/tensor.h"
#include "kernels/costs/launch_cost.h"

namespace glass::kernels {

// The row pass: per logit, exp and max/add in the first sweep (3), and with write_dlogits exp, mul
// and sub in the second (3 more); the logits read (and, with write_dlogits, written back in
// place), targets read and losses written. The count of valid rows (valid, 4 bytes) is written by
// the same launch on cpu and by the target check's launch on emu/cuda (kernels/cuda/classifier.cu:
// check_targets), whose cost has it.
inline LaunchCost fused_classifier_cost(const Tensor& logits, const Tensor& targets,
                                        const Tensor& losses, bool write_dlogits) {
  return {(write_dlogits ? 6.0 : 3.0) * static_cast<double>(logits.numel()),
          static_cast<double>(logits.nbytes()) * (write_dlogits ? 2.0 : 1.0) +
              static_cast<double>(targets.nbytes() + losses.nbytes())};
}

}  // namespace glass::kernels
