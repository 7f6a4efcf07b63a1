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

void AdamW::update(const std::vector<size_t>& with_grad) {
  std::vector<kernels::AdamWParam> batch;
  for (size_t i : with_grad) {
    const Tensor& p = params()[i].second;
    batch.push_back(
        {p, p.grad(), buffer(0, i), buffer(1, i), decays(i) ? options_.weight_decay : 0.0});
  }
  const kernels::AdamWHyper hyper{lr(), options_.beta1, options_.beta2, options_.eps, step_count()};
  kernels::backend(batch[0].param).adamw_step(batch, hyper);
}

}  // namespace glass
