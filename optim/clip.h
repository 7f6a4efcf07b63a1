// Global-norm gradient clipping, as torch.nn.utils.clip_grad_norm_.
#pragma once

#include <vector>

#include "engine/tensor.h"

namespace glass {

// norm = sqrt(sum over all gradients of sum(g^2)) (one multi-tensor sum_squares, accumulated in
// double in a fixed order; the gradients must share one device). When norm > max_norm every
// gradient is scaled in place by max_norm / (norm + 1e-6), so the new norm is max_norm (to within
// that 1e-6). Returns the norm before clipping. Parameters without a gradient are skipped. A
// non-finite norm (a NaN or an infinity in some gradient) leaves every gradient as it is: scaling
// by max_norm / inf = 0 would zero the finite gradients and turn each infinity into a NaN (inf *
// 0), hiding where the value came from; the caller must not apply such a step (train_gpt's
// --on-nonfinite skips or stops it). Launches run in Phase::optimizer.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The same clipping without reading the norm back: the scaling runs on the device from the sum
// of squares (kernels::Backend::clip_scale), so a CUDA graph can capture it. Returns that sum,
// f64 [1] on the gradients' device (the norm is sqrt(item(sum))), or an undefined tensor when no
// parameter has a gradient. clip_grad_norm is this plus the read. max_norm = infinity asks only for
// the sum: nothing can be scaled, so no scaling kernel is launched.
Tensor clip_grad_norm_on_device(const std::vector<Tensor>& params, double max_norm);

}  // namespace glass
