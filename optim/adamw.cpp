#include "optim/adamw.h"

#include "kernels/backend.h"

namespace glass {

AdamW::AdamW(NamedTensors params, const AdamWOptions& options)
    : Optimizer(std::move(params), options.lr, {"exp_avg", "exp_avg_sq"}), options_(options) {
  GLASS_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
              "adamw: betas ({}, {}) must be in [0, 1)", options.beta1, options.beta2);
  GLASS_CHECK(options.eps > 0, "adamw: eps {} must be positive", options.eps);
  GLASS_CHECK(options.weight_decay >= 0, "adamw: weight_decay {} must be >= 0",
              options.weight_decay);
}

void AdamW::update(size_t i, const Tensor& param, const Tensor& grad) {
  kernels::backend(param).adamw_step(param, grad, buffer(0, i), buffer(1, i), lr(), options_.beta1,
                                     options_.beta2, options_.eps,
                                     decays(i) ? options_.weight_decay : 0.0, step_count());
}

}  // namespace glass
